"""Eager PyTorch causal conv1d backward: autograd through the forward, in the case dtype.

This is the same-dtype yardstick of the tolerance rule (FlashAttention's convention: an
implementation may be k times as far from float64 as eager PyTorch in the same dtype).
Every step runs in x's dtype (weights are cast to it), as a naive port would compute
(or autocast: an fp16 dweight over a long sequence with a shifted dout overflows to inf
where its exact value passes 65504, although the suite's dweight is fp32).

On CUDA, cuDNN runs with TF32 off and deterministic algorithms, whatever the process's
settings: PyTorch's default `allow_tf32` made fp32 conv gradients TF32 (errors 4x the fp32
ceiling at 1.7M-term dweight sums), and its default algorithms sum dweight in an order
that changes between calls (fuzzed on the H200).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bwd_suite.suite.registry import implementation


def _forward(x, weight, bias, seq_idx, init, activation):
    B, D, L = x.shape
    K = weight.shape[1]
    xc = torch.cat([init if init is not None else x.new_zeros(B, D, K - 1), x], dim=-1)
    if seq_idx is None:
        pre = F.conv1d(xc, weight.unsqueeze(1), bias, groups=D)
    else:
        pad = seq_idx[:, :1].expand(B, K - 1) if init is not None \
            else seq_idx.new_full((B, K - 1), -1)
        ids = torch.cat([pad, seq_idx], dim=1).unfold(1, K, 1)  # (B, L, K)
        mask = (ids == seq_idx.unsqueeze(-1)).unsqueeze(1)
        pre = (xc.unfold(-1, K, 1) * mask * weight[None, :, None, :]).sum(-1)
        if bias is not None:
            pre = pre + bias[None, :, None]
        pre = pre.masked_fill((seq_idx < 0).unsqueeze(1), 0)
    out = F.silu(pre) if activation == "silu" else pre
    return out, xc[..., L:]


KNOWN_FAILURES = {
    "causal_conv1d/torch-fp16-dweight-overflow/": "dweight computed in fp16 overflows: its "
                                                  "exact value 3.98e5 passes 65504",
}


@implementation("causal_conv1d", "torch_ref", kind="reference", version=torch.__version__,
                known_failures=KNOWN_FAILURES)
def torch_ref(*, x, weight, bias, dout, seq_idx, initial_states, dfinal_states, activation,
              out):
    """autograd of conv1d (+SiLU) in the activation dtype"""
    dt = x.dtype
    with torch.enable_grad(), torch.backends.cudnn.flags(
            enabled=True, benchmark=False, deterministic=True, allow_tf32=False):
        leaves = {"dx": x.detach().requires_grad_(),
                  "dweight": weight.detach().to(dt).requires_grad_()}
        if bias is not None:
            leaves["dbias"] = bias.detach().to(dt).requires_grad_()
        if initial_states is not None:
            leaves["dinitial_states"] = initial_states.detach().requires_grad_()
        y, final = _forward(leaves["dx"], leaves["dweight"], leaves.get("dbias"), seq_idx,
                            leaves.get("dinitial_states"), activation)
        ys, gs = [y], [dout]
        if dfinal_states is not None:
            ys.append(final)
            gs.append(dfinal_states)
        grads = torch.autograd.grad(ys, list(leaves.values()), gs, allow_unused=True)
    for name, g in zip(leaves, grads):
        if g is None:
            out[name].zero_()
        else:
            out[name].copy_(g)
