"""A cross entropy that writes dlogits "into the logits" the way Liger does (declared
`in_place`), except that it computes them into a tensor of its own and swaps that storage
under the logits tensor it was handed (`.data =`), leaving the given buffer unwritten."""

import torch

from bwd_suite.kernels.cross_entropy.torch_ref import torch_ref
from bwd_suite.suite.registry import implementation


@implementation("cross_entropy", "tests_swaps_logits", kind="external",
                in_place={"dlogits": "logits"})
def swaps_logits(*, logits, out, **kw):
    mine = {"loss": out["loss"], "dlogits": torch.empty_like(logits)}
    torch_ref(logits=logits, out=mine, **kw)
    logits.data = mine["dlogits"]
