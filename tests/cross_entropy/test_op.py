"""The cross_entropy op (ops/cross_entropy.py): the input factory and its alignment
masks, the shift helper, the accumulation loop against the whole-batch mean, bytes, and
bad input (exit 2, one line naming the file and key)."""

import pytest
import torch

from bwd_suite.ops import cross_entropy as op
from bwd_suite.suite import registry
from tests.bad_input import assert_one_line_naming_file_and_key

SPEC = registry.op("cross_entropy")
CPU = torch.device("cpu")


def params(**kw):
    return dict(SPEC.params.defaults(), **kw)


def impl(name):
    return next(i for i in registry.implementations("cross_entropy") if i.name == name)


def test_inputs_shapes_dtypes_and_a_nonzero_upstream_gradient():
    t = SPEC.make_inputs(params(batch=3, seq=5, vocab=7, dtype="float16"), 1, CPU).tensors
    assert t["logits"].shape == (15, 7) and t["logits"].dtype == torch.float16
    assert t["targets"].dtype == torch.int64 and t["targets"].shape == (15,)
    assert ((0 <= t["targets"]) & (t["targets"] < 7)).all()
    assert t["grad_loss"].shape == () and abs(t["grad_loss"].item()) >= 0.5
    none = SPEC.make_inputs(params(reduction="none"), 1, CPU).tensors["grad_loss"]
    assert none.shape == (32,) and (none.abs() >= 0.5).all()


@pytest.mark.parametrize("targets, want", [("zero", 0), ("last", 9)])
def test_targets_at_the_ends_of_the_vocabulary(targets, want):
    t = SPEC.make_inputs(params(vocab=10, targets=targets), 1, CPU).tensors["targets"]
    assert (t == want).all()


def test_masks_set_labels_to_the_ignore_index():
    def ignored(**kw):
        p = params(batch=4, seq=8, **kw)
        y = SPEC.make_inputs(p, 3, CPU).tensors["targets"].reshape(4, 8)
        return (y == p["ignore_index"]).tolist()

    row = [False] * 8
    assert ignored(mask="prompt", mask_len=3) == [[True] * 3 + [False] * 5] * 4
    # right padding of mask_len * (b + 1) // B tokens: 1, 2, 3, 4
    assert ignored(mask="padding_right") == [[False] * (8 - k) + [True] * k
                                             for k in (1, 2, 3, 4)]
    assert ignored(mask="padding_left") == [[True] * k + [False] * (8 - k)
                                            for k in (1, 2, 3, 4)]
    assert ignored(mask="all_ignored_row") == [[True] * 8] + [row] * 3
    assert ignored(mask="all_ignored_batch") == [[True] * 8] * 4
    # eos = false: the last unpadded token's label
    assert ignored(eos=False) == [[False] * 7 + [True]] * 4
    assert ignored(eos=False, mask="padding_right", mask_len=4)[3] == [False] * 3 + [True] * 5


def test_shift_helper_stays_inside_each_sequence():
    y = torch.tensor([10, 11, 12, 20, 21, 22])
    assert op.shift_targets(y, 3, -100).tolist() == [11, 12, -100, 21, 22, -100]
    assert op.aligned(y, False, 3, -100) is y


def test_a_shifted_case_scores_position_t_against_token_t_plus_1():
    # hand-made: each row's logits put all mass on the next token of its sequence
    V, ids = 5, torch.tensor([1, 2, 3, 4, 0, 1])  # two sequences of 3
    nxt = torch.tensor([2, 3, 0, 0, 1, 0])
    x = torch.full((6, V), -20.0)
    x[torch.arange(6), nxt] = 20.0
    inputs = op.CaseInputs({"logits": x, "targets": ids, "grad_loss": torch.ones(6)},
                           dict(ignore_index=-100, label_smoothing=0.0, reduction="none",
                                z_loss=0.0, softcap=0.0, shift=True, seq_len=3,
                                accumulation=1, normalize="global_tokens"))
    p = params(batch=2, seq=3, vocab=V, reduction="none", shift=True, dtype="float32")
    out = SPEC.call(impl("torch_ref").fn, inputs, p, lambda e, inputs=None: dict(e))
    assert out["loss"].max().item() < 1e-12  # right next-token predictions everywhere
    assert not out["dlogits"][[2, 5]].any()  # the last positions are ignored
    want = SPEC.golden(x.double(), ids, torch.ones(6, dtype=torch.float64),
                       **inputs.attrs)
    torch.testing.assert_close(out["loss"].double(), want["loss"])


@pytest.mark.parametrize("name", ["torch_ref", "torch_fp32"])
def test_global_tokens_accumulation_equals_the_whole_batch_mean(name):
    p = params(batch=4, seq=8, vocab=32, mask="padding_right", mask_len=6, shift=True,
               dtype="float32")
    inputs = SPEC.make_inputs(p, 7, CPU)
    fn = impl(name).fn
    whole = SPEC.call(fn, inputs, p, lambda e, inputs=None: dict(e))
    acc_p = dict(p, accumulation=2)
    acc_inputs = op.CaseInputs(inputs.tensors, dict(inputs.attrs, accumulation=2))
    acc = SPEC.call(fn, acc_inputs, acc_p, lambda e, inputs=None: dict(e))
    torch.testing.assert_close(acc["loss"], whole["loss"], rtol=1e-6, atol=0)
    torch.testing.assert_close(acc["dlogits"], whole["dlogits"], rtol=1e-5, atol=1e-9)
    bug_p = dict(acc_p, normalize="micro_batch")
    bug = SPEC.call(fn, op.CaseInputs(inputs.tensors, dict(acc_inputs.attrs,
                                                           normalize="micro_batch")),
                    bug_p, lambda e, inputs=None: dict(e))
    assert abs(bug["loss"].item() - whole["loss"].item()) > 1e-3  # unequal counts


def test_empty_means_are_foreseen_from_the_parameters():
    assert op.empty_mean(params(mask="all_ignored_batch"))
    assert not op.empty_mean(params(mask="all_ignored_batch", reduction="sum"))
    assert op.empty_mean(params(mask="all_ignored_row", accumulation=2,
                                normalize="micro_batch"))
    assert not op.empty_mean(params(mask="all_ignored_row", batch=4, accumulation=2,
                                    normalize="micro_batch"))
    assert op.empty_mean(params(seq=1, shift=True))
    # drawn by the fuzzer, and a known failure of the PyTorch forms (their NaN) only
    assert SPEC.params.fuzz_bounds(params(mask="all_ignored_batch"), "cpu") is None
    for impl in registry.select_implementations("cross_entropy", ["torch_ref", "torch_fp32"]):
        assert impl.known_failure("cross_entropy/fuzz/x", "cpu",
                                  params(mask="all_ignored_batch"))
        assert impl.known_failure("cross_entropy/fuzz/x", "cpu",
                                  params(mask="all_ignored_batch", reduction="sum")) is None


def test_bytes_read_logits_once_and_write_dlogits_once():
    p = params(batch=1, seq=8192, vocab=128256)
    assert SPEC.bytes(p) == 2 * 8192 * 128256 * 2 + 8 * 8192 + 8


@pytest.mark.parametrize("line, key, says", [
    ('targets = "class"\ntarget_class = 32', "target_class", "outside [0, 32)"),
    ('targets = "class"\ntarget_class = -1', "target_class", "not the ignore_index"),
    ('mask = "prompt"\nmask_len = 9', "mask_len", "longer than the sequence"),
    ('mask = "padding_left"\nmask_len = 12', "mask_len", "longer than the sequence"),
    ("accumulation = 3", "accumulation", "do not divide batch 4"),
    ('normalize = "micro_batch"', "normalize", "has no effect"),
    ('mask = "all_ignored_row"\nbatch = 1', "mask", "batch >= 2"),
], ids=["class-V", "class-negative", "prompt", "padding", "accumulation", "normalize",
        "ignored-row"])
def test_bad_input_is_one_line_naming_file_and_key(tmp_path, capsys, line, key, says):
    assert_one_line_naming_file_and_key(
        tmp_path, capsys, f'op = "cross_entropy"\n[defaults]\nbatch = 4\n[[case]]\n'
                          f'name = "c"\ntags = ["ci"]\nseq = 8\nvocab = 32\n{line}\n',
        key, says)


def test_smoothing_1_on_logits_their_spacing_makes_equal_is_not_fuzzed():
    # fuzzed torch_ref (seeds 1, 2): bf16 logits of -1000 +- 1 (spacing 4) or -160 +- 1
    # (spacing 1) round to one value, the exact gradient against the uniform target is
    # 1e-14, and every implementation's rounding is 1e10 times that
    bounds = SPEC.params.fuzz_bounds
    for mean in (-1000.0, -160.0):
        p = params(dtype="bfloat16", vocab=8, logit_mean=mean, label_smoothing=1.0)
        assert bounds(p, "cpu")[0] == "label_smoothing"
    # spread logits keep a gradient: drawn
    assert bounds(params(dtype="bfloat16", vocab=8, logit_mean=-1.0, label_smoothing=1.0),
                  "cpu") is None
    assert bounds(params(dtype="float32", vocab=8, logit_mean=-1000.0, label_smoothing=1.0),
                  "cpu") is None
