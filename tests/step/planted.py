"""Step bugs planted from outside the registry (`--impl OP=tests.step.planted:NAME`), each a
plain callable of its op's contract that a training step gets wrong while it may look fine
alone: the step's checks must catch them."""

from bwd_suite.kernels.adamw.torch_ref import torch_ref as adamw_ref
from bwd_suite.kernels.cross_entropy.torch_ref import torch_ref as ce_ref


def ce_unshifted(*, shift, **kw):
    """A mask that supervises the wrong token: each position scored against its own label,
    not the next one's (the loss stays a normal float)."""
    ce_ref(shift=False, **kw)


def adamw_skips_one_tensor(*, params, grads, master, exp_avg, exp_avg_sq, out, **kw):
    """A loss scale that skips the step for one tensor and not another: each tensor stepped
    on its own, so only the tensor holding the inf is skipped."""
    found = out["found_inf"]
    total = 0.0
    for i in range(len(params)):
        one = {"params": params[i:i + 1], "grads": grads[i:i + 1],
               "master": None if master is None else master[i:i + 1],
               "exp_avg": exp_avg[i:i + 1], "exp_avg_sq": exp_avg_sq[i:i + 1]}
        adamw_ref(**one, **kw, out=out)
        total = max(total, float(found))
    found.fill_(total)
