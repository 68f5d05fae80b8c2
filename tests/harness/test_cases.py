"""The case-file loader (suite/cases.py): validation errors, sweep expansion, ids, seeds,
profile and op filtering, and the repository's own case files.

Every error test asserts the exception type *and* that the one-line message names the
file, the key (and the sweep or case where there is one) and says what is wrong.
"""

from __future__ import annotations

import dataclasses
import itertools
import textwrap
from pathlib import Path

import pytest

from bwd_suite.suite import cases as cases_mod
from bwd_suite.suite import registry
from bwd_suite.suite.cases import PROFILE_INCLUDES, PROFILES, load_cases, load_file
from bwd_suite.suite.errors import SuiteInputError

OP = "causal_conv1d"
SPEC = registry.op(OP)

HEAD = f'op = "{OP}"\n'


def write(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text))
    return p


def sweep(body: str = "", name: str = "s", tags: str = '["smoke"]', kind: str = "sweep") -> str:
    return f'\n[[{kind}]]\nname = "{name}"\ntags = {tags}\n' + textwrap.dedent(body)


def load_error(path: Path, *fragments: str) -> SuiteInputError:
    """load_file(path) must raise SuiteInputError whose message holds every fragment."""
    with pytest.raises(SuiteInputError) as info:
        load_file(path)
    msg = str(info.value)
    assert "\n" not in msg, f"error is not one line: {msg!r}"
    assert str(path) in msg, f"file not named in {msg!r}"
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"
    return info.value


# ------------------------------------------------------------------ file-level errors

def test_not_valid_toml(tmp_path):
    p = write(tmp_path, HEAD + "[[sweep]\nname = 's'\n")
    load_error(p, "not valid TOML")


def test_unknown_top_level_key(tmp_path):
    p = write(tmp_path, HEAD + 'sweeps = 1\n' + sweep())
    load_error(p, 'key "sweeps"', "unknown top-level key")


def test_missing_op(tmp_path):
    p = write(tmp_path, sweep())
    load_error(p, 'key "op"', "missing")


def test_unknown_op(tmp_path):
    p = write(tmp_path, 'op = "causal_conv2d"\n' + sweep())
    e = load_error(p, 'key "op"', "'causal_conv2d' is not one of", OP)
    assert e.what.startswith("'causal_conv2d'")


def test_file_seed_must_be_an_integer(tmp_path):
    p = write(tmp_path, HEAD + "seed = true\n" + sweep())
    load_error(p, 'key "seed"', "integer", "True")


def test_file_with_no_cases(tmp_path):
    p = write(tmp_path, HEAD)
    load_error(p, "defines no cases")


def test_missing_file_in_load_cases(tmp_path):
    with pytest.raises(SuiteInputError, match="no such case file or folder"):
        load_cases([tmp_path / "nope.toml"])


# ------------------------------------------------------------------ unknown parameters

def test_unknown_parameter_in_sweep(tmp_path):
    p = write(tmp_path, HEAD + sweep("widht = [2, 3]\n", name="widths"))
    load_error(p, 'sweep "widths"', 'key "widht"', "unknown parameter of op causal_conv1d",
               "width")


def test_unknown_parameter_in_case(tmp_path):
    p = write(tmp_path, HEAD + sweep("seqln = 4\n", name="one", kind="case"))
    load_error(p, 'case "one"', 'key "seqln"', "unknown parameter", "seqlen")


def test_unknown_parameter_in_defaults(tmp_path):
    p = write(tmp_path, HEAD + "[defaults]\nbatchsize = 2\n" + sweep())
    load_error(p, "defaults", 'key "batchsize"', "unknown parameter", "batch")


def test_defaults_take_one_value(tmp_path):
    p = write(tmp_path, HEAD + "[defaults]\nwidth = [2, 3]\n" + sweep())
    load_error(p, "defaults", 'key "width"', "one value")


def test_defaults_value_is_type_checked(tmp_path):
    p = write(tmp_path, HEAD + '[defaults]\nwidth = "4"\n' + sweep())
    load_error(p, "defaults", 'key "width"', "expected an integer", "'4'")


# ------------------------------------------------------------------ wrong values

@pytest.mark.parametrize("body, key, what", [
    ('width = "4"\n', "width", "expected an integer, got '4'"),
    ("bias = 1\n", "bias", "expected true or false, got 1"),
    ("seqlen = true\n", "seqlen", "expected an integer, got True"),
    ("x_scale = \"big\"\n", "x_scale", "number, got 'big'"),
    ("x_scale = true\n", "x_scale", "number, got True"),
    ("dtype = 16\n", "dtype", "expected a string"),
    ("chunks = [1, true]\n", "chunks", "expected a list of integers"),
    ("chunks = [[1], 2]\n", "chunks", "expected a list of integers"),
], ids=["str-for-int", "int-for-bool", "bool-for-int", "str-for-float", "bool-for-float",
        "int-for-str", "bool-in-int-list", "mixed-int-list"])
def test_wrong_type(tmp_path, body, key, what):
    p = write(tmp_path, HEAD + sweep(body, name="typed"))
    load_error(p, 'sweep "typed"', f'key "{key}"', what)


def test_wrong_type_inside_a_sweep_list(tmp_path):
    p = write(tmp_path, HEAD + sweep('width = [2, "3"]\n', name="w"))
    load_error(p, 'sweep "w"', 'key "width"', "expected an integer, got '3'")


def test_value_outside_choices(tmp_path):
    p = write(tmp_path, HEAD + sweep('dtype = ["float32", "fp8"]\n', name="dt"))
    load_error(p, 'sweep "dt"', 'key "dtype"', "'fp8' is not one of", "bfloat16")


def test_below_minimum(tmp_path):
    p = write(tmp_path, HEAD + sweep("width = 1\n", name="w1"))
    load_error(p, 'sweep "w1"', 'key "width"', "below the minimum 2")


def test_int_list_element_below_minimum(tmp_path):
    p = write(tmp_path, HEAD + sweep("chunks = [0, 2]\n", name="c"))
    load_error(p, 'sweep "c"', 'key "chunks"', "below the minimum 1")


def test_float_below_minimum(tmp_path):
    p = write(tmp_path, HEAD + sweep("x_scale = -1.0\n", name="xs"))
    load_error(p, 'sweep "xs"', 'key "x_scale"', "below the minimum")


def test_list_in_a_case(tmp_path):
    p = write(tmp_path, HEAD + sweep("width = [2, 3]\n", name="one", kind="case"))
    load_error(p, 'case "one"', 'key "width"', "[[case]] takes one value")


def test_list_of_lists_in_a_case(tmp_path):
    p = write(tmp_path, HEAD + sweep("seqlen = 8\nchunks = [[1], [2]]\n", name="one",
                                     kind="case"))
    load_error(p, 'case "one"', 'key "chunks"', "[[case]] takes one value")


def test_empty_sweep_list(tmp_path):
    p = write(tmp_path, HEAD + sweep("width = []\n", name="empty"))
    load_error(p, 'sweep "empty"', 'key "width"', "empty list sweeps nothing")


# ------------------------------------------------------------------ names and tags

def test_missing_name(tmp_path):
    p = write(tmp_path, HEAD + '[[sweep]]\ntags = ["smoke"]\nwidth = 4\n')
    load_error(p, "sweep", 'key "name"', "needs a name")


def test_name_with_slash(tmp_path):
    p = write(tmp_path, HEAD + sweep(name="a/b"))
    load_error(p, 'key "name"', "without '/'")


def test_duplicate_sweep_name(tmp_path):
    p = write(tmp_path, HEAD + sweep("width = 2\n", name="dup") + sweep("width = 3\n", name="dup"))
    load_error(p, 'sweep "dup"', 'key "name"', "used twice")


def test_sweep_and_case_share_the_name_space(tmp_path):
    p = write(tmp_path, HEAD + sweep(name="dup") + sweep(name="dup", kind="case"))
    load_error(p, 'case "dup"', 'key "name"', "used twice")


@pytest.mark.parametrize("tags, what", [
    (None, "non-empty list of profiles"),
    ("[]", "non-empty list of profiles"),
    ('"smoke"', "non-empty list of profiles"),
    ('["smoke", "weekly"]', "'weekly' is not one of"),
], ids=["missing", "empty", "not-a-list", "unknown-profile"])
def test_bad_tags(tmp_path, tags, what):
    if tags is None:
        text = HEAD + '[[sweep]]\nname = "t"\nwidth = 4\n'
    else:
        text = HEAD + sweep(name="t", tags=tags)
    p = write(tmp_path, text)
    e = load_error(p, 'sweep "t"', 'key "tags"', what)
    if tags is None or tags == "[]":
        assert all(prof in e.what for prof in PROFILES)


# ------------------------------------------------------------------ exclude

def test_exclude_with_unknown_key(tmp_path):
    p = write(tmp_path, HEAD + sweep("width = [2, 3]\nexclude = [{widht = 2}]\n", name="ex"))
    load_error(p, 'sweep "ex"', 'key "exclude"', "'widht' is not one of", "width")


def test_exclude_must_be_a_list_of_tables(tmp_path):
    p = write(tmp_path, HEAD + sweep("width = [2, 3]\nexclude = {width = 2}\n", name="ex"))
    load_error(p, 'sweep "ex"', 'key "exclude"', "list of tables")


# ------------------------------------------------------------------ impossible combinations

def test_chunks_sum_reaching_seqlen(tmp_path):
    p = write(tmp_path, HEAD + sweep("seqlen = 8\nchunks = [[3], [4, 4]]\n", name="ch"))
    e = load_error(p, 'sweep "ch"', 'key "chunks"', "sum to 8", "seqlen 8")
    assert "[4, 4]" in e.what  # the offending combination is shown


def test_chunks_sum_above_seqlen_in_a_case(tmp_path):
    p = write(tmp_path, HEAD + sweep("seqlen = 4\nchunks = [3, 2]\n", name="ch", kind="case"))
    load_error(p, 'case "ch"', 'key "chunks"', "sum to 5")


def test_chunks_with_seq_idx(tmp_path):
    p = write(tmp_path, HEAD + sweep('seqlen = 16\nchunks = [4]\nseq_idx = ["none", "random"]\n',
                                     name="chs"))
    e = load_error(p, 'sweep "chs"', 'key "chunks"', "seq_idx")
    assert "random" in e.what


def test_dfinal_layout_without_final_states(tmp_path):
    p = write(tmp_path, HEAD + sweep('final_states = false\ndfinal_layout = "contiguous"\n',
                                     name="dfl"))
    load_error(p, 'sweep "dfl"', 'key "dfinal_layout"', "final_states")


def test_exclude_removes_an_impossible_combination(tmp_path):
    p = write(tmp_path, HEAD + sweep(
        'final_states = [false, true]\ndfinal_layout = ["channel_last", "contiguous"]\n'
        'exclude = [{final_states = false, dfinal_layout = "contiguous"}]\n', name="dfl"))
    got = load_file(p)
    assert len(got) == 3
    assert all(c.params["final_states"] or c.params["dfinal_layout"] == "channel_last"
               for c in got)


# ------------------------------------------------------------------ duplicate ids across files

def test_same_case_id_in_two_files(tmp_path):
    body = HEAD + sweep("width = [2, 3]\n", name="same")
    write(tmp_path, body, "a.toml")
    write(tmp_path, body, "sub/b.toml")
    with pytest.raises(SuiteInputError) as info:
        load_cases([tmp_path])
    msg = str(info.value)
    assert "a.toml" in msg and "b.toml" in msg, msg
    assert f"{OP}/same/" in msg and "also defined in" in msg, msg


# ------------------------------------------------------------------ expansion and ids

def test_readable_id_of_the_brief_example(tmp_path):
    p = write(tmp_path, HEAD + sweep(
        'batch = 2\ndim = 256\nseqlen = 1\nwidth = 4\ndtype = "bfloat16"\n'
        'layout = "channel_last"\nactivation = "silu"\ninitial_states = true\n'
        'final_states = true\n', name="states"))
    (case,) = load_file(p)
    assert case.id == "causal_conv1d/states/B2-D256-L1-K4-bf16-cl-silu-init-final"
    assert case.op == OP and case.group == "states" and case.file == str(p)


def test_non_default_tokens_show_in_the_id(tmp_path):
    p = write(tmp_path, HEAD + sweep(
        'batch = 1\ndim = 8\nseqlen = 32\nwidth = 3\ndtype = "float16"\n'
        'weight_dtype = "match"\nlayout = "channel_first"\nx_sliced = true\nx_scale = 4.0\n'
        'bias = false\nactivation = "none"\nseq_idx = "mid_tile"\ntile = 16\n'
        'final_states = true\ndfinal_layout = "expanded"\ndout_layout = "sliced"\n',
        name="all"))
    (case,) = load_file(p)
    xs = SPEC.params.by_name["x_scale"].token(4.0)  # "xs4.0" today ("xs4" earlier)
    assert xs.startswith("xs4")
    assert case.id == (f"causal_conv1d/all/B1-D8-L32-K3-fp16-wmatch-cf-xslice-{xs}-nobias-"
                       "pack-mid_tile-T16-final-dF-expanded-dout-sliced")


def test_count_is_the_cartesian_product(tmp_path):
    p = write(tmp_path, HEAD + sweep(
        'width = [2, 3, 4]\nseqlen = [1, 7]\ndtype = ["float32", "bfloat16"]\nbias = [true, false]\n'))
    got = load_file(p)
    assert len(got) == 3 * 2 * 2 * 2
    combos = {(c.params["width"], c.params["seqlen"], c.params["dtype"], c.params["bias"])
              for c in got}
    assert combos == set(itertools.product([2, 3, 4], [1, 7], ["float32", "bfloat16"],
                                           [True, False]))
    ids = [c.id for c in got]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith(f"{OP}/s/") for i in ids)


def test_exclusions_remove_exactly_the_matching_combinations(tmp_path):
    p = write(tmp_path, HEAD + sweep(
        'width = [2, 3, 4]\nseqlen = [1, 7]\nbias = [true, false]\n'
        'exclude = [{width = 2, seqlen = 1}, {bias = false, width = 4}]\n'))
    got = {(c.params["width"], c.params["seqlen"], c.params["bias"]) for c in load_file(p)}
    expected = {(w, l, b) for w, l, b in itertools.product([2, 3, 4], [1, 7], [True, False])
                if not (w == 2 and l == 1) and not (b is False and w == 4)}
    assert got == expected
    assert len(got) == 12 - 2 - 2


def test_exclude_on_an_int_list_value(tmp_path):
    p = write(tmp_path, HEAD + sweep(
        'seqlen = 16\nchunks = [[1, 2], [3], []]\nexclude = [{chunks = [1, 2]}]\n'))
    assert sorted(c.params["chunks"] for c in load_file(p)) == [[], [3]]


def test_ids_are_stable_across_loads_and_order(tmp_path):
    a = write(tmp_path, HEAD + sweep('width = [2, 4]\ndtype = ["float32", "bfloat16"]\n'),
              "a.toml")
    b = write(tmp_path, HEAD + sweep('dtype = ["bfloat16", "float32"]\nwidth = [4, 2]\n'),
              "b.toml")
    first, again, reordered = load_file(a), load_file(a), load_file(b)
    assert [c.id for c in first] == [c.id for c in again]
    assert {c.id for c in first} == {c.id for c in reordered}
    assert {c.id: c.seed for c in first} == {c.id: c.seed for c in reordered}


def test_int_list_sweep_versus_single_value(tmp_path):
    p = write(tmp_path, HEAD + sweep("seqlen = 16\nchunks = [[1, 2], [3]]\n", name="sw")
              + sweep("seqlen = 16\nchunks = [1, 2]\n", name="one"))
    got = load_file(p)
    swept = [c for c in got if c.group == "sw"]
    single = [c for c in got if c.group == "one"]
    assert sorted(c.params["chunks"] for c in swept) == [[1, 2], [3]]
    assert [c.params["chunks"] for c in single] == [[1, 2]]
    assert {c.id.rsplit("-", 1)[-1] for c in swept} == {"chunks1.2", "chunks3"}
    assert single[0].id.endswith("-chunks1.2")


def test_int_list_in_a_case_takes_one_list(tmp_path):
    p = write(tmp_path, HEAD + sweep("seqlen = 16\nchunks = [4, 4]\n", name="one", kind="case"))
    (case,) = load_file(p)
    assert case.params["chunks"] == [4, 4]


def test_defaults_apply_and_entries_override_them(tmp_path):
    p = write(tmp_path, HEAD + '[defaults]\ndim = 16\nseqlen = 9\ndtype = "float32"\n'
              + sweep("width = [2, 3]\n", name="a")
              + sweep("seqlen = 5\n", name="b", kind="case"))
    got = load_file(p)
    a = [c for c in got if c.group == "a"]
    (b,) = [c for c in got if c.group == "b"]
    assert all(c.params["dim"] == 16 and c.params["seqlen"] == 9 for c in a)
    assert all(c.params["dtype"] == "float32" for c in got)
    assert b.params["seqlen"] == 5 and b.params["dim"] == 16
    # parameters set nowhere take the op's declared default
    for c in got:
        for name, value in SPEC.params.defaults().items():
            if name not in ("dim", "seqlen", "dtype", "width"):
                assert c.params[name] == value, name
    assert set(b.params) == set(SPEC.params.by_name)


def test_seeds_are_deterministic_and_differ_between_cases(tmp_path):
    text = HEAD + sweep('width = [2, 3, 4]\nseqlen = [1, 8, 64]\n')
    p1 = write(tmp_path, text, "one.toml")
    p2 = write(tmp_path, text, "elsewhere/two.toml")  # the seed does not depend on the path
    s1 = {c.id: c.seed for c in load_file(p1)}
    assert s1 == {c.id: c.seed for c in load_file(p1)}
    assert s1 == {c.id: c.seed for c in load_file(p2)}
    assert len(set(s1.values())) == len(s1) == 9
    assert all(isinstance(s, int) and 0 <= s < 2**31 for s in s1.values())


def test_file_seed_shifts_every_case_seed(tmp_path):
    base = {c.id: c.seed for c in load_file(write(tmp_path, HEAD + sweep("width = [2, 3]\n"),
                                                  "a.toml"))}
    shifted = {c.id: c.seed for c in load_file(
        write(tmp_path, HEAD + "seed = 5\n" + sweep("width = [2, 3]\n"), "b.toml"))}
    assert base.keys() == shifted.keys()
    assert all(shifted[i] == (base[i] + 5) % 2**31 for i in base)


def test_explicit_seed_is_honoured(tmp_path):
    p = write(tmp_path, HEAD + sweep("seed = 1234\nwidth = [2, 3]\n", name="sw")
              + sweep("seed = 77\n", name="one", kind="case") + sweep(name="auto"))
    seeds = {}
    for c in load_file(p):
        seeds.setdefault(c.group, []).append(c.seed)
    assert seeds["sw"] == [1234, 1234]
    assert seeds["one"] == [77]
    assert seeds["auto"][0] not in (77, 1234)


# ------------------------------------------------------------------ profiles and ops

def _profile_file(tmp_path):
    return write(tmp_path, HEAD
                 + sweep(name="sm", tags='["smoke"]')
                 + sweep(name="ci", tags='["ci"]')
                 + sweep(name="gpu", tags='["gpu"]')
                 + sweep(name="perf", tags='["perf"]')
                 + sweep(name="both", tags='["perf", "gpu"]'))


@pytest.mark.parametrize("profile, groups", [
    ("smoke", {"sm"}),
    ("ci", {"sm", "ci"}),
    ("gpu", {"sm", "ci", "gpu", "both"}),  # nested: gpu runs smoke and ci too
    ("perf", {"perf", "both"}),
    ("nightly", {"sm", "ci", "gpu", "both"}),
])
def test_profile_filtering(tmp_path, profile, groups):
    p = _profile_file(tmp_path)
    got = load_cases([p], profile=profile)
    assert {c.group for c in got} == groups
    assert all(c.in_profile(profile) for c in got)


def test_profile_includes_as_documented():
    assert set(PROFILE_INCLUDES) <= set(PROFILES)
    assert PROFILE_INCLUDES["ci"] == ("smoke",)
    assert set(PROFILE_INCLUDES["nightly"]) >= {"smoke", "ci"}
    assert "perf" not in PROFILE_INCLUDES.get("nightly", ())


def test_in_profile_of_smoke_and_perf_cases(tmp_path):
    cs = {c.group: c for c in load_file(_profile_file(tmp_path))}
    assert [p for p in PROFILES if cs["sm"].in_profile(p)] == ["smoke", "ci", "gpu", "nightly"]
    assert [p for p in PROFILES if cs["perf"].in_profile(p)] == ["perf"]


def test_no_filter_returns_everything(tmp_path):
    assert len(load_cases([_profile_file(tmp_path)])) == 5


def test_op_filter(tmp_path, monkeypatch):
    p = _profile_file(tmp_path)
    assert len(load_cases([p], op=OP)) == 5
    # cases of another op are dropped: register a second (known) op name for the filter
    monkeypatch.setitem(registry._OPS, "zz_other_op", SPEC)
    assert load_cases([p], op="zz_other_op") == []
    assert len(load_cases([p], op=OP, profile="smoke")) == 1


@pytest.mark.parametrize("kw, flag", [({"profile": "weekly"}, "--profile"),
                                      ({"op": "causal_conv2d"}, "--op")])
def test_unknown_profile_or_op_in_load_cases(tmp_path, kw, flag):
    p = _profile_file(tmp_path)
    with pytest.raises(SuiteInputError) as info:
        load_cases([p], **kw)
    assert info.value.where == flag
    assert str(info.value).startswith(flag + ":")
    assert repr(next(iter(kw.values()))) in str(info.value)


# ------------------------------------------------------------------ the repository's case files

_REAL = sorted(cases_mod.CASES_DIR.rglob("*.toml")) if cases_mod.CASES_DIR.is_dir() else []


@pytest.mark.skipif(not _REAL, reason=f"no .toml case files under {cases_mod.CASES_DIR} yet")
def test_repository_case_files_load_with_unique_valid_ids():
    got = load_cases()
    assert got, "the case files define no cases"
    ids = [c.id for c in got]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes, f"duplicate case ids: {dupes}"
    for c in got:
        spec = registry.op(c.op)
        assert spec.check_case(dict(c.params)) is None, c.id
        for name, param in spec.params.by_name.items():
            assert param.check(c.params[name]) is None, (c.id, name)
        assert c.tags and c.tags <= set(PROFILES), c.id


# ------------------------------------------------------------------ more malformed input

def test_sweep_entries_must_be_tables(tmp_path):
    p = write(tmp_path, HEAD + "sweep = [1, 2]\n")
    load_error(p, 'key "sweep"', "[[sweep]]")


def test_name_must_be_a_string(tmp_path):
    p = write(tmp_path, HEAD + '[[sweep]]\nname = ["a"]\ntags = ["smoke"]\n')
    load_error(p, 'key "name"', "name")


@pytest.mark.parametrize("value", ['"x"', "true", "-5", "1.5"])
def test_entry_seed_must_be_a_non_negative_integer(tmp_path, value):
    p = write(tmp_path, HEAD + sweep(f"seed = {value}\n", name="sd"))
    load_error(p, 'sweep "sd"', 'key "seed"', "integer")


def test_file_seed_must_be_non_negative(tmp_path):
    p = write(tmp_path, HEAD + "seed = -1\n" + sweep())
    load_error(p, 'key "seed"', "-1")


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_x_scale_must_be_finite(tmp_path, value):
    p = write(tmp_path, HEAD + sweep(f"x_scale = {value}\n", name="xs"))
    load_error(p, 'sweep "xs"', 'key "x_scale"', value)


def test_exclude_value_of_the_wrong_type_is_refused(tmp_path):
    # a mistyped value would otherwise silently exclude nothing
    p = write(tmp_path, HEAD + sweep('width = [2, 3]\nexclude = [{width = "2"}]\n', name="ex"))
    load_error(p, 'sweep "ex"', 'key "exclude"', "expected an integer")


def test_exclude_value_outside_choices_is_refused(tmp_path):
    p = write(tmp_path, HEAD + sweep('dtype = ["float32", "bfloat16"]\n'
                                     'exclude = [{dtype = "bf16"}]\n', name="ex"))
    load_error(p, 'sweep "ex"', 'key "exclude"', "'bf16' is not one of")


@pytest.mark.parametrize("body", ["width = [2, 2]\n", "x_scale = [2, 2.0]\n"],
                         ids=["repeated-int", "int-and-float"])
def test_one_sweep_cannot_produce_the_same_id_twice(tmp_path, body):
    p = write(tmp_path, HEAD + sweep(body, name="dup"))
    load_error(p, 'sweep "dup"', "share the id", f"{OP}/dup/")


def test_distinct_float_values_get_distinct_ids(tmp_path):
    p = write(tmp_path, HEAD + sweep("x_scale = [2.0000001, 2.0000002, 0.5]\n"))
    ids = [c.id for c in load_file(p)]
    assert len(set(ids)) == 3, ids


# ------------------------------------------------------------------ bad input (issue 24)

def test_file_not_utf8_is_named(tmp_path):
    p = tmp_path / "latin1.toml"
    p.write_bytes((HEAD + sweep(name="caf\xe9")).encode("latin-1"))
    e = load_error(p, "not UTF-8 text", "byte 0xe9")
    assert e.where == str(p)


def test_integer_of_more_than_4300_digits_is_not_a_traceback(tmp_path):
    p = write(tmp_path, HEAD + sweep(f"seqlen = {'9' * 5000}\n", name="wide"))
    load_error(p, "not valid TOML")


@pytest.mark.parametrize("body, key, what", [
    (f"seqlen = {2**63}\n", "seqlen", f"{2**63} does not fit a 64-bit integer"),
    (f"seqlen = [4, {2**64}]\n", "seqlen", f"{2**64} does not fit a 64-bit integer"),
    (f"x_scale = {-2**63 - 1}\n", "x_scale", "does not fit a 64-bit integer"),
    (f"seqlen = 64\nchunks = [1, {2**70}]\n", "chunks", f"element {2**70} does not fit"),
    (f"seqlen = {'9' * 400}\n", "seqlen", "an integer of 1329 bits does not fit"),
    (f"width = [2, 3]\nexclude = [{{width = {2**63}}}]\n", "exclude", "does not fit"),
    (f"seed = {2**63}\n", "seed", "does not fit a 64-bit integer"),
], ids=["int", "in-a-sweep", "float-kind", "int-list-element", "400-digits", "exclude",
        "seed"])
def test_integer_outside_int64(tmp_path, body, key, what):
    p = write(tmp_path, HEAD + sweep(body, name="wide"))
    load_error(p, 'sweep "wide"', f'key "{key}"', what)


def test_int64_bounds_are_accepted_by_the_param_check():
    seqlen, scale = SPEC.params.by_name["seqlen"], SPEC.params.by_name["x_scale"]
    assert seqlen.check(2**63 - 1) is None
    assert scale.check(-(2**63)) is not None  # below the minimum, not "does not fit"
    assert "does not fit" not in scale.check(-(2**63))


def test_integer_in_defaults_outside_int64(tmp_path):
    p = write(tmp_path, HEAD + f"[defaults]\nbatch = {2**63}\n" + sweep())
    load_error(p, "defaults", 'key "batch"', "does not fit a 64-bit integer")


def _count_check_case(monkeypatch) -> list:
    """Records every combination the loader expands (spec.check_case sees each one)."""
    seen = []

    def counting(values):
        seen.append(dict(values))
        return SPEC.check_case(values)

    monkeypatch.setitem(registry._OPS, OP, dataclasses.replace(SPEC, check_case=counting))
    return seen


def _huge(n_batches: int) -> str:
    return sweep(f"batch = {list(range(1, n_batches + 1))}\ndim = {list(range(1, 101))}\n"
                 f"seqlen = {list(range(1, 101))}\n", name="huge")


def test_sweep_above_the_limit_is_refused_before_expansion(tmp_path, monkeypatch):
    seen = _count_check_case(monkeypatch)
    p = write(tmp_path, HEAD + sweep("width = 2\n", name="fine") + _huge(300))
    load_error(p, 'sweep "huge"', "3,000,000 combinations", "100,000", "--allow-large")
    assert seen == []


def test_sweep_size_counts_before_exclusions(tmp_path):
    p = write(tmp_path, HEAD + sweep('width = [2, 3, 4]\nseqlen = [1, 7]\n'
                                     'exclude = [{width = 2}, {width = 3}]\n', name="ex"))
    with pytest.raises(SuiteInputError) as info:
        load_file(p, max_sweep=5)
    assert "6 combinations" in info.value.what and "more than 5" in info.value.what
    assert len(load_file(p, max_sweep=6)) == 2
    assert len(load_cases([p], max_sweep=None)) == 2


def test_sweep_limit_default_and_none(tmp_path):
    assert cases_mod.MAX_SWEEP == 100_000
    p = write(tmp_path, HEAD + sweep("batch = [1, 2]\nwidth = [2, 3, 4]\n"))
    with pytest.raises(SuiteInputError, match="6 combinations"):
        load_cases([p], max_sweep=4)
    assert len(load_cases([p], max_sweep=None)) == 6


def test_sweeps_of_other_profiles_are_not_expanded(tmp_path, monkeypatch):
    # the gpu sweep would be refused (an impossible combination) if it were expanded
    p = write(tmp_path, HEAD + sweep("width = [2, 3]\n", name="sm", tags='["smoke"]')
              + sweep("seqlen = 8\nchunks = [[4, 4], [2]]\n", name="g", tags='["gpu"]'))
    seen = _count_check_case(monkeypatch)
    got = load_cases([p], profile="ci")  # ci includes smoke
    assert {c.group for c in got} == {"sm"} and len(got) == 2
    assert len(seen) == 2
    with pytest.raises(SuiteInputError, match='sweep "g"'):
        load_cases([p], profile="gpu")
    with pytest.raises(SuiteInputError, match='sweep "g"'):
        load_cases([p])


def test_profile_skip_follows_profile_includes(tmp_path, monkeypatch):
    p = _profile_file(tmp_path)
    seen = _count_check_case(monkeypatch)
    assert {c.group for c in load_cases([p], profile="nightly")} == {"sm", "ci", "gpu", "both"}
    assert len(seen) == 4  # perf was not expanded
    seen.clear()
    assert {c.group for c in load_file(p, profile="smoke")} == {"sm"}
    assert len(seen) == 1


def test_entries_of_other_profiles_are_still_validated(tmp_path):
    p = write(tmp_path, HEAD + sweep(name="sm") + sweep("widht = 3\n", name="g", tags='["gpu"]'))
    with pytest.raises(SuiteInputError, match='sweep "g", key "widht"'):
        load_cases([p], profile="smoke")


def test_file_whose_cases_are_all_in_other_profiles_defines_cases(tmp_path):
    p = write(tmp_path, HEAD + sweep(name="g", tags='["gpu"]'))
    assert load_cases([p], profile="smoke") == []
    assert len(load_file(p)) == 1


# ------------------------------------------------------------------ nested profiles

NESTED = ("smoke", "ci", "gpu", "nightly")


def test_profiles_are_nested():
    """smoke < ci < gpu < nightly: each runs every case of the cheaper ones; perf apart."""
    for cheaper, dearer in itertools.pairwise(NESTED):
        assert cases_mod.profile_tags(cheaper) < cases_mod.profile_tags(dearer), dearer
    assert cases_mod.profile_tags("perf") == {"perf"}
    assert all("perf" not in cases_mod.profile_tags(p) for p in NESTED)


def test_nested_profiles_on_the_repository_cases():
    ids = {p: {c.id for c in load_cases(profile=p)} for p in PROFILES}
    for cheaper, dearer in itertools.pairwise(NESTED):
        assert ids[cheaper] <= ids[dearer], (cheaper, dearer, sorted(ids[cheaper] - ids[dearer])[:3])
        assert ids[cheaper] != ids[dearer] or dearer == "nightly"
    perf_only = {c.id for c in load_cases() if c.tags == {"perf"}}
    assert perf_only and not perf_only & ids["nightly"]


def test_profile_skip_of_nested_profiles(tmp_path, monkeypatch):
    p = _profile_file(tmp_path)
    seen = _count_check_case(monkeypatch)
    assert {c.group for c in load_cases([p], profile="gpu")} == {"sm", "ci", "gpu", "both"}
    assert len(seen) == 4  # perf was not expanded


# ------------------------------------------------------------------ covering sweeps

PAIRWISE_BODY = ('combine = "pairwise"\nwidth = [2, 3, 4]\nseqlen = [1, 7, 64]\n'
                 'dtype = ["float32", "float16", "bfloat16"]\n'
                 'layout = ["channel_first", "channel_last"]\nbias = [true, false]\n')


def _pairs(cases, keys):
    return {((a, json_safe(c.params[a])), (b, json_safe(c.params[b])))
            for c in cases for a, b in itertools.combinations(keys, 2)}


def test_pairwise_sweep_covers_every_pair_with_fewer_cases(tmp_path):
    p = write(tmp_path, HEAD + sweep(PAIRWISE_BODY, name="pw"))
    cov = []
    got = load_cases([p], coverage=cov)
    keys = ["width", "seqlen", "dtype", "layout", "bias"]
    full = load_file(write(tmp_path, HEAD + sweep(PAIRWISE_BODY.split("\n", 1)[1], name="pw"),
                           "full.toml"))
    assert len(full) == 108 and 9 <= len(got) < 20
    assert _pairs(got, keys) == _pairs(full, keys)
    # ids and seeds are those of the same parameters in a cartesian sweep of the name
    by_id = {c.id: c for c in full}
    for c in got:
        assert c.id in by_id and by_id[c.id].seed == c.seed
        assert dict(by_id[c.id].params) == dict(c.params)
    (s,) = cov
    assert (s.name, s.strength, s.cases, s.product, s.uncoverable) == ("pw", 2, len(got), 108, ())


def test_strength_3_covers_every_triple(tmp_path):
    p = write(tmp_path, HEAD + sweep(PAIRWISE_BODY.replace('combine = "pairwise"',
                                                           "strength = 3"), name="t3"))
    got = load_file(p)
    keys = ["width", "seqlen", "dtype", "layout", "bias"]
    triples = {tuple((k, c.params[k]) for k in sub)
               for c in got for sub in itertools.combinations(keys, 3)}
    want = 0
    for sub in itertools.combinations(keys, 3):
        values = {"width": 3, "seqlen": 3, "dtype": 3, "layout": 2, "bias": 2}
        want += values[sub[0]] * values[sub[1]] * values[sub[2]]
    assert len(triples) == want and 27 <= len(got) < 108


def test_covering_sweep_is_deterministic_and_ids_stay_when_a_value_is_added(tmp_path):
    a = load_file(write(tmp_path, HEAD + sweep(PAIRWISE_BODY, name="pw"), "a.toml"))
    assert [c.id for c in a] == [c.id for c in load_file(tmp_path / "a.toml")]
    wider = PAIRWISE_BODY.replace("seqlen = [1, 7, 64]", "seqlen = [1, 7, 64, 300]")
    b = load_file(write(tmp_path, HEAD + sweep(wider, name="pw"), "b.toml"))
    ids_b = {json_key(c): c for c in b}
    kept = [c for c in a if json_key(c) in ids_b]
    assert kept  # some cases stay ...
    for c in kept:  # ... under the same id and seed
        assert ids_b[json_key(c)].id == c.id and ids_b[json_key(c)].seed == c.seed
    for c in a + b:
        assert c.id == f"{OP}/pw/{SPEC.params.case_id(dict(c.params))}"


def json_key(case) -> str:
    import json

    return json.dumps(dict(case.params), sort_keys=True)


def test_covering_avoids_impossible_combinations_and_reports_pairs(tmp_path):
    # chunks [40] leaves no last chunk of seqlen 16 (check_case), seq_idx with chunks is
    # not defined, and one pair is excluded: none of it is an error in a covering sweep
    body = ('combine = "pairwise"\nseqlen = [16, 64]\nchunks = [[], [3, 4], [40]]\n'
            'seq_idx = ["none", "random"]\nwidth = [2, 3]\n'
            'exclude = [{width = 2, seqlen = 64}]\n')
    p = write(tmp_path, HEAD + sweep(body, name="cov"))
    cov = []
    got = load_cases([p], coverage=cov)
    for c in got:
        assert SPEC.check_case(dict(c.params)) is None, c.id
        assert not (c.params["width"] == 2 and c.params["seqlen"] == 64), c.id
    pairs = _pairs(got, ["seqlen", "chunks", "seq_idx", "width"])
    assert (("seqlen", 64), ("chunks", (40,))) in pairs  # the valid ones are still held
    assert (("chunks", (3, 4)), ("seq_idx", "none")) in pairs
    (s,) = cov
    shown = {u.text(): u.reason for u in s.uncoverable}
    # width 2 forces seqlen 16 (the exclude), which chunks [40] does not fit
    assert set(shown) == {"seqlen=16, chunks=[40]", "seqlen=64, width=2", "width=2, chunks=[40]",
                          "seq_idx='random', chunks=[3, 4]", "seq_idx='random', chunks=[40]"}
    assert "leaves no last chunk" in shown["seqlen=16, chunks=[40]"]
    assert "excluded by" in shown["seqlen=64, width=2"]
    assert "packed sequences" in shown["seq_idx='random', chunks=[3, 4]"]
    # the same sweep as a cartesian product is refused on its first impossible combination
    load_error(write(tmp_path, HEAD + sweep(body.split("\n", 1)[1], name="cov"), "cart.toml"),
               'sweep "cov"', 'key "chunks"')


def test_covering_sweep_without_any_valid_case_is_an_error(tmp_path):
    p = write(tmp_path, HEAD + sweep('combine = "pairwise"\nseqlen = [4, 5]\n'
                                     'chunks = [[10], [20]]\n', name="none"))
    load_error(p, 'sweep "none"', 'key "chunks"', "in every combination")


@pytest.mark.parametrize("body, key, what", [
    ('combine = "pairs"\n', "combine", "'pairs' is not one of: cartesian, pairwise"),
    ("combine = 2\n", "combine", "expected one of cartesian, pairwise, got 2"),
    ('strength = "3"\n', "strength", "expected an integer, got '3'"),
    ("strength = true\n", "strength", "expected an integer, got True"),
    ("strength = 1\n", "strength", "2 <= strength"),
    ("strength = 4\n", "strength", "this sweep has 3 list-valued keys (seqlen, width, dtype)"),
    ('combine = "cartesian"\nstrength = 2\n', "strength", "no strength"),
    ('combine = "pairwise"\nstrength = 3\n', "strength", "is strength 2, not 3"),
], ids=["unknown", "not-a-string", "str-strength", "bool-strength", "strength-1",
        "strength-above-keys", "cartesian-with-strength", "pairwise-with-3"])
def test_combine_and_strength_are_checked(tmp_path, body, key, what):
    p = write(tmp_path, HEAD + sweep(body + 'seqlen = [8, 9]\nwidth = [2, 3]\n'
                                     'dtype = ["float32", "bfloat16"]\n', name="cw"))
    load_error(p, 'sweep "cw"', f'key "{key}"', what)


def test_pairwise_needs_two_list_valued_keys(tmp_path):
    p = write(tmp_path, HEAD + sweep('combine = "pairwise"\nwidth = [2, 3]\n', name="one"))
    load_error(p, 'sweep "one"', 'key "combine"', "strength 2 needs",
               "1 list-valued key (width)")


@pytest.mark.parametrize("key, value", [("combine", '"pairwise"'), ("strength", "2")])
def test_combine_in_a_case_is_refused(tmp_path, key, value):
    p = write(tmp_path, HEAD + sweep(f"{key} = {value}\n", name="c1", kind="case"))
    load_error(p, 'case "c1"', f'key "{key}"', "only a [[sweep]]")


def test_cartesian_is_the_default_and_can_be_named(tmp_path):
    body = "width = [2, 3, 4]\nseqlen = [1, 7]\n"
    a = load_file(write(tmp_path, HEAD + sweep(body), "a.toml"))
    b = load_file(write(tmp_path, HEAD + sweep('combine = "cartesian"\n' + body), "b.toml"))
    assert [c.id for c in a] == [c.id for c in b] and len(a) == 6


def test_size_limit_is_for_the_cartesian_product_only(tmp_path, monkeypatch):
    """A covering sweep over 3,000,000 combinations loads without --allow-large and
    without walking the product; its t-tuples are what the limit counts."""
    seen = _count_check_case(monkeypatch)
    body = _huge(300).replace('name = "huge"\n', 'name = "huge"\ncombine = "pairwise"\n')
    p = write(tmp_path, HEAD + body)
    got = load_file(p)
    assert 30_000 <= len(got) <= 31_000  # 300 x 100 pairs of batch and dim
    assert len(seen) < 500_000  # far from the 3,000,000 combinations
    keys = ["batch", "dim", "seqlen"]
    assert len(_pairs(got, keys)) == 300 * 100 + 300 * 100 + 100 * 100
    # the limit counts the t-tuples of a covering sweep
    small = write(tmp_path, HEAD + sweep('strength = 3\nwidth = [2, 3, 4]\nseqlen = [1, 2]\n'
                                         'dim = [8, 16]\nbatch = [1, 2]\n', name="t3"), "t.toml")
    with pytest.raises(SuiteInputError) as info:
        load_file(small, max_sweep=40)
    assert "44 value 3-tuples to cover, more than 40" in info.value.what
    assert "--allow-large" in info.value.what
    assert len(load_file(small, max_sweep=44)) >= 12
    # and the cartesian limit still applies to the same lists without combine
    load_error(write(tmp_path, HEAD + _huge(300), "cart.toml"), "3,000,000 combinations")


def test_list_shows_covering_sweeps_against_the_product(tmp_path, capsys):
    from bwd_suite.cli import main

    p = write(tmp_path, HEAD + sweep(PAIRWISE_BODY, name="pw", tags='["ci"]')
              + sweep('combine = "pairwise"\nseqlen = [16, 64]\nchunks = [[], [40]]\n'
                      'width = [2, 3]\n', name="cov", tags='["ci"]'))
    assert main(["list", "--cases", str(p), "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    section = out.split("covering sweeps", 1)[1].split("cases per profile", 1)[0]
    n_pw = len(load_file(p)) - len([c for c in load_file(p) if c.group == "cov"])
    n_cov = len([c for c in load_file(p) if c.group == "cov"])
    assert f"{OP:<20} 2 sweeps: {n_pw + n_cov} cases against {108 + 8}" in section
    assert f'"pw" (pairwise): {n_pw} against 108' in section
    assert f'"cov" (pairwise): {n_cov} against 8, 1 not coverable' in section
    assert "not coverable: seqlen=16, chunks=[40]: chunk lengths sum to 40" in section
    # what list printed before stays: the profile table and the implementations
    assert "cases per profile" in out and "implementations (device cpu)" in out
    assert main(["list", "--cases", str(p), "--op", "softmax"]) == 0
    assert "covering sweeps" not in capsys.readouterr().out


# ------------------------------------------------------------------ the repository's matrices

# Per op, the features that must meet pairwise within the ci profile (and so the gpu one):
# param -> the values that count (others are ignored), or a function of the case.
_FEATURES = {
    "causal_conv1d": {
        "layout": None, "seq_idx": None, "initial_states": None, "final_states": None,
        "width": (2, 3, 4), "dtype": None, "activation": None, "bias": None,
        "weight_dtype": None, "dout_layout": None, "x_sliced": None,
        "length": lambda p: "short" if p["seqlen"] < p["width"] else
                            "long" if p["seqlen"] >= 64 else None,
    },
    "softmax": {
        "dropout": None, "mask": None, "dtype": None, "p": (0.0, 0.1, 0.9),  # scale 1, ~1, 10
        "length % 8": lambda p: p["length"] % 8 == 0,
        "warp row": lambda p: p["length"] <= 256,
        "rows % 4": lambda p: p["rows"] % 4 == 0 if p["rows"] > 1 else None,
    },
    "layer_norm": {
        "affine": None, "dtype": None, "weight_dtype": None,
        "rows": lambda p: "one" if p["rows"] == 1 else "many" if p["rows"] > 4 else None,
        "hidden % 8": lambda p: p["hidden"] % 8 == 0 if p["hidden"] > 2 else None,
        "large mean": lambda p: p["x_mean"] != 0, "tiny var": lambda p: p["x_std"] < 1,
    },
}


def _feature(case, name, how):
    p = case.params
    if callable(how):
        return how(p)
    v = p[name]
    return v if how is None or v in how else None


@pytest.mark.parametrize("op", sorted(_FEATURES))
def test_every_feature_meets_every_other_in_ci(op):
    cases = load_cases(op=op, profile="ci")
    feats = _FEATURES[op]
    seen = set()
    values = {f: [] for f in feats}
    for c in cases:
        vals = {f: _feature(c, f, how) for f, how in feats.items()}
        for f, v in vals.items():
            if v is not None and v not in values[f]:
                values[f].append(v)
        for a, b in itertools.combinations(feats, 2):
            if vals[a] is not None and vals[b] is not None:
                seen.add((a, json_safe(vals[a]), b, json_safe(vals[b])))
    spec = registry.op(op)
    missing = []
    base = dict(next(iter(cases)).params)
    for a, b in itertools.combinations(feats, 2):
        for va, vb in itertools.product(values[a], values[b]):
            if (a, json_safe(va), b, json_safe(vb)) in seen:
                continue
            if a in spec.params.by_name and b in spec.params.by_name:
                trial = dict(base, **{a: va, b: vb})
                if a in ("p", "mask") or b in ("p", "mask"):
                    trial["dropout"] = trial["dropout"] or "dropout" not in (a, b)
                if spec.check_case(trial):
                    continue  # impossible together
            missing.append(f"{a}={va!r} x {b}={vb!r}")
    assert not missing, f"{op}: pairs no ci case holds: {missing[:10]}"


def json_safe(v):
    return tuple(v) if isinstance(v, list) else v


_BOUNDARIES = {
    # op -> (description, predicate over params): each needs a ci case
    "causal_conv1d": [
        ("dim > 512, not a multiple of 8", lambda p: p["dim"] > 512 and p["dim"] % 8),
        ("batch x dim > 1024, odd", lambda p: 1024 < p["batch"] * p["dim"] and
         p["batch"] * p["dim"] % 2),
        ("batch x dim > 65536, odd", lambda p: p["batch"] * p["dim"] > 65536 and
         p["batch"] * p["dim"] % 2),
        ("batch > 1024", lambda p: p["batch"] > 1024),
    ],
    # gpu only: seconds per case in the CPU CI's mutant run
    "causal_conv1d gpu": [
        ("batch > 65535 (CUDA's grid limit)", lambda p: p["batch"] > 65535),
        ("dim > 65536", lambda p: p["dim"] > 65536),
    ],
    "layer_norm": [
        ("rows > 1024, odd", lambda p: p["rows"] > 1024 and p["rows"] % 2),
        ("rows > 65536, odd", lambda p: p["rows"] > 65536 and p["rows"] % 2),
        ("hidden > 8192, not a multiple of 8", lambda p: p["hidden"] > 8192 and p["hidden"] % 8),
        ("hidden > 8192, a multiple of 8", lambda p: p["hidden"] > 8192 and not p["hidden"] % 8),
    ],
    "softmax": [
        ("rows > 1024, odd", lambda p: p["rows"] > 1024 and p["rows"] % 2),
        ("rows > 65536, odd", lambda p: p["rows"] > 65536 and p["rows"] % 2),
        ("length > 32768, not a multiple of 8", lambda p: p["length"] > 32768 and p["length"] % 8),
        ("length > 32768, 16-byte aligned 16-bit rows", lambda p: p["length"] > 32768 and
         not p["length"] % 8 and p["dtype"] != "float32"),
        ("length > 16384 fp32, not a multiple of 4", lambda p: p["length"] > 16384 and
         p["length"] % 4 and p["dtype"] == "float32"),
    ],
}


@pytest.mark.parametrize("op", ["causal_conv1d", "layer_norm", "softmax"])
@pytest.mark.parametrize("profile", ["ci", "gpu"])
def test_cheap_profiles_reach_past_every_block_boundary(op, profile):
    cases = load_cases(op=op, profile=profile)
    wanted = _BOUNDARIES[op] + _BOUNDARIES.get(f"{op} {profile}", [])
    missing = [what for what, pred in wanted if not any(pred(c.params) for c in cases)]
    assert not missing, f"{op} {profile}: no case with {missing}"


def test_a_covering_is_built_once_per_sweep_and_check(tmp_path, monkeypatch):
    built = []
    real = cases_mod.covering.cover

    def counting(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cases_mod.covering, "cover", counting)
    p = write(tmp_path, HEAD + sweep(PAIRWISE_BODY.replace("[1, 7, 64]", "[1, 7, 65]"),
                                     name="once"))
    first = [(c.id, c.seed) for c in load_file(p)]
    assert [(c.id, c.seed) for c in load_file(p)] == first and len(built) == 1
    # another check_case (another op spec) is another covering
    seen = _count_check_case(monkeypatch)
    assert [(c.id, c.seed) for c in load_file(p)] == first and len(built) == 2 and seen
