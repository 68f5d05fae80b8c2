"""Facts about this machine's attention backends, for planning the attention adapters.

Prints torch/cuDNN versions, whether flash_attn is importable, the schemas of the SDPA
backward ops, whether FlexAttention compiles forward and backward here, the dense
bf16/fp16 GEMM throughput, and each pinned SDPA backend's backward time (autograd with
the graph kept) at B4 H16 L2048 D128 bf16, causal and not.
    python3 scripts/attention_probe.py
"""
import importlib
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def events(fn, reps=20, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(start, end):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(start, end))
    return times[len(times) // 2]


def main():
    print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
    print("device", torch.cuda.get_device_name(), torch.cuda.get_device_properties(0).total_memory >> 30, "GiB")
    for name in ("flash_attn", "flash_attn_interface", "flash_attn_3", "triton", "liger_kernel"):
        try:
            m = importlib.import_module(name)
            print("import", name, "ok", getattr(m, "__version__", ""))
        except Exception as exc:  # noqa: BLE001
            print("import", name, "fails:", type(exc).__name__, str(exc)[:120])
    for op in ("_scaled_dot_product_flash_attention_backward",
               "_scaled_dot_product_efficient_attention_backward",
               "_scaled_dot_product_cudnn_attention_backward",
               "_scaled_dot_product_flash_attention",
               "_scaled_dot_product_efficient_attention",
               "_scaled_dot_product_cudnn_attention",
               "_flash_attention_backward", "_efficient_attention_backward"):
        try:
            print(op, getattr(torch.ops.aten, op).default._schema)
        except Exception as exc:  # noqa: BLE001
            print(op, "missing", exc)
    # dense GEMM peak
    for dt in (torch.bfloat16, torch.float16):
        n = 8192
        a = torch.randn(n, n, device="cuda", dtype=dt)
        b = torch.randn(n, n, device="cuda", dtype=dt)
        ms = events(lambda: a @ b, reps=30)
        print(f"gemm {dt} {n}^3: {ms:.3f} ms, {2 * n**3 / ms / 1e9:.0f} TFLOP/s")
    B, H, L, D = 4, 16, 2048, 128
    for causal in (False, True):
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION):
            q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            do = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)
            try:
                with sdpa_kernel(backend):
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                ms = events(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
                pairs = B * H * (L * (L + 1) // 2 if causal else L * L)
                flops = 10 * D * pairs
                print(f"sdpa bwd {backend.name} causal={causal}: {ms:.3f} ms {flops / ms / 1e9:.0f} TFLOP/s; fwd grad_fn {type(o.grad_fn).__name__}")
            except Exception as exc:  # noqa: BLE001
                print(f"sdpa bwd {backend.name} causal={causal}: fails {type(exc).__name__} {str(exc)[:200]}")
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        t0 = time.time()
        flex = torch.compile(flex_attention, dynamic=False)
        mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, None, None, L, L)
        q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        do = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)
        o = flex(q, k, v, block_mask=mask)
        torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        torch.cuda.synchronize()
        print(f"flex compile+first {time.time() - t0:.1f} s")
        ms = events(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
        flops = 10 * D * B * H * (L * (L + 1) // 2)
        print(f"flex bwd causal: {ms:.3f} ms {flops / ms / 1e9:.0f} TFLOP/s")
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
        g = torch.autograd.grad(ref, (q, k, v), do.double())
        g2 = torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        print("flex vs f64 max err", [float((a.double() - b).abs().max()) for a, b in zip(g2, g)])
    except Exception as exc:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        print("flex fails", type(exc).__name__, str(exc)[:300])


if __name__ == "__main__":
    main()
