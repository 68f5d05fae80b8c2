"""The regression rule: the Mann-Whitney U test against textbook values and a brute-force
permutation check of its tie correction, the factor-and-p rule on synthetic samples, and
the verdict changes and presence lists between two runs."""

import itertools
import math
import random

import pandas as pd
import pytest

from bwd_suite.suite import regression
from bwd_suite.suite.regression import Change, Rule, compare, mann_whitney_u


# -- Mann-Whitney U ------------------------------------------------------------------------

@pytest.mark.parametrize("n, p", [(3, 2 / 20), (4, 2 / 70), (5, 2 / 252)])
def test_fully_separated_samples_have_the_smallest_exact_p(n, p):
    # two-sided: 2 / C(2n, n), the only two most extreme orderings
    r = mann_whitney_u(range(n), range(n, 2 * n))
    assert r.exact and r.u == 0 and r.p == pytest.approx(p)
    assert mann_whitney_u(range(n, 2 * n), range(n)).u == n * n


@pytest.mark.parametrize("n, critical_05, critical_01", [(5, 2, 0), (8, 13, 7), (10, 23, 16),
                                                          (20, 127, 105)])
def test_exact_distribution_matches_the_critical_value_tables(n, critical_05, critical_01):
    """Textbook tables of U (two-sided): the largest U with P(U <= u) <= alpha / 2."""
    counts = regression._u_counts(n, n)
    total = math.comb(2 * n, n)
    assert sum(counts) == total and counts == counts[::-1]

    def cdf(u):
        return sum(counts[:u + 1]) / total

    assert cdf(critical_05) <= 0.025 < cdf(critical_05 + 1)
    assert cdf(critical_01) <= 0.005 < cdf(critical_01 + 1)


def test_scipy_documentation_example():
    """scipy.stats.mannwhitneyu's docstring: males vs females, U1 = 17, exact p = 0.1111,
    asymptotic (continuity-corrected) p = 0.11134688653314041."""
    males, females = [19, 22, 16, 29, 24], [20, 11, 17, 12]
    exact = mann_whitney_u(males, females)
    assert exact.exact and exact.u == 17 and exact.p == pytest.approx(1 / 9)
    normal = mann_whitney_u(males, females, exact=False)
    assert normal.p == pytest.approx(0.11134688653314041, rel=1e-9)


def test_tie_correction_equals_the_permutation_variance():
    """With ties the normal approximation must use the exact permutation variance of U;
    enumerate every split of the pooled values to get it independently."""
    x, y = [1, 2, 2, 3, 3], [2, 3, 3, 4, 5, 5]
    pooled = x + y
    us = []
    for idx in itertools.combinations(range(len(pooled)), len(x)):
        a = [pooled[i] for i in idx]
        b = [pooled[i] for i in range(len(pooled)) if i not in idx]
        us.append(sum((u > v) + 0.5 * (u == v) for u in a for v in b))
    mean = sum(us) / len(us)
    var = sum((u - mean) ** 2 for u in us) / len(us)
    r = mann_whitney_u(x, y)
    assert not r.exact  # ties: the normal approximation
    assert r.u == sum((u > v) + 0.5 * (u == v) for u in x for v in y)
    z = (abs(r.u - mean) - 0.5) / math.sqrt(var)
    assert r.p == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-12)


def test_identical_values_give_p_one_and_bad_calls_raise():
    assert mann_whitney_u([1.0] * 5, [1.0] * 7).p == 1.0
    with pytest.raises(ValueError):
        mann_whitney_u([], [1.0])
    with pytest.raises(ValueError):
        mann_whitney_u([1, 1], [2], exact=True)


def test_exact_and_normal_agree_for_larger_samples():
    rng = random.Random(3)
    a = [rng.gauss(0, 1) for _ in range(30)]
    b = [rng.gauss(0.6, 1) for _ in range(30)]
    exact, normal = mann_whitney_u(a, b, exact=True), mann_whitney_u(a, b, exact=False)
    assert exact.p == pytest.approx(normal.p, rel=0.05)


# -- the rule on synthetic timing samples ---------------------------------------------------

def _samples(rng, median, rel_noise, n=20):
    return [median * (1 + rng.gauss(0, rel_noise)) for _ in range(n)]


def _run(samples: dict, verdicts: dict = None, run_started="2026-01-01T00:00:00") -> pd.DataFrame:
    """A results-like frame: {(case_id, impl): samples}."""
    rows = []
    for (case, impl), s in samples.items():
        s = list(s) if s is not None else None
        rows.append(dict(op="op", case_id=case, impl=impl, case_group=case.split("/")[0],
                         verdict=(verdicts or {}).get((case, impl), "pass"),
                         reason="", run_started=run_started, device_name="dev",
                         time_samples_s=s,
                         time_median_s=sorted(s)[len(s) // 2] if s else None))
    return pd.DataFrame(rows)


def _one(base, cur, rule=Rule()):
    c = compare(_run({("g/c", "k"): base}), _run({("g/c", "k"): cur}), rule)
    assert c.n_common == 1
    return c


def test_tight_twenty_percent_slowdown_is_a_regression():
    rng = random.Random(0)
    c = _one(_samples(rng, 1e-3, 0.01), _samples(rng, 1.2e-3, 0.01))
    assert [t.change for t in c.timing] == [Change.REGRESSION]
    assert c.timing[0].ratio == pytest.approx(1.2, rel=0.03) and c.timing[0].p < 1e-6
    assert c.gate_failed


def test_tight_twenty_percent_speedup_is_an_improvement():
    rng = random.Random(1)
    c = _one(_samples(rng, 1e-3, 0.01), _samples(rng, 0.8e-3, 0.01))
    assert [t.change for t in c.timing] == [Change.IMPROVEMENT]
    assert not c.gate_failed


@pytest.mark.parametrize("seed", range(5))
def test_noisy_five_percent_change_is_not_flagged(seed):
    rng = random.Random(seed)
    c = _one(_samples(rng, 1e-3, 0.15), _samples(rng, 1.05e-3, 0.15))
    assert not c.regressions and not c.improvements and not c.gate_failed


def test_too_few_samples_beyond_the_factor_are_uncertain():
    # 3 against 3 samples: the smallest possible two-sided p is 0.1
    c = _one([1.0, 1.01, 1.02], [1.5, 1.51, 1.52])
    assert [t.change for t in c.timing] == [Change.UNCERTAIN]
    assert c.timing[0].p == pytest.approx(0.1) and not c.gate_failed


def test_factor_and_alpha_are_configurable():
    rng = random.Random(2)
    base, cur = _samples(rng, 1e-3, 0.005), _samples(rng, 1.06e-3, 0.005)
    assert not _one(base, cur).timing  # 6 % is inside the default factor
    assert [t.change for t in _one(base, cur, Rule(factor=1.05)).timing] == \
        [Change.REGRESSION]
    assert [t.change for t in _one(base, cur, Rule(factor=1.05, alpha=1e-30)).timing] == \
        [Change.UNCERTAIN]
    with pytest.raises(ValueError):
        Rule(factor=0.9)
    with pytest.raises(ValueError):
        Rule(alpha=0)


def test_identical_runs_flag_nothing():
    rng = random.Random(4)
    run = _run({(f"g/c{i}", impl): _samples(rng, 1e-3 * (i + 1), 0.05)
                for i in range(30) for impl in ("a", "b")})
    c = compare(run, run.copy())
    assert c.n_common == c.n_timed == 60
    assert not (c.timing or c.new_failures or c.fixed_failures or c.disappeared
                or c.new_cases or c.env_differences or c.gate_failed)


# -- verdict changes and presence ----------------------------------------------------------

def test_new_fixed_disappeared_and_new_cases_are_listed_separately():
    s = [1.0, 1.1, 1.2]
    base = _run({("g/a", "k"): s, ("g/b", "k"): s, ("g/c", "k"): s, ("g/gone", "k"): s,
                 ("g/u", "k"): s},
                {("g/b", "k"): "fail", ("g/c", "k"): "error", ("g/u", "k"): "unsupported"})
    cur = _run({("g/a", "k"): s, ("g/b", "k"): s, ("g/c", "k"): s, ("g/new", "k"): s,
                ("g/newbad", "k"): s, ("g/u", "k"): s},
               {("g/a", "k"): "fail", ("g/c", "k"): "fail", ("g/newbad", "k"): "error",
                ("g/u", "k"): "error"})
    c = compare(base, cur)
    assert [(v.case_id, v.before, v.after) for v in c.new_failures] == [
        ("g/a", "pass", "fail"), ("g/u", "unsupported", "error")]
    # a new case that fails is listed apart from the cases that failed anew (issue 24)
    assert [(v.case_id, v.before, v.after) for v in c.failing_new_cases] == [
        ("g/newbad", None, "error")]
    assert [(v.case_id, v.before, v.after) for v in c.fixed_failures] == [("g/b", "fail",
                                                                          "pass")]
    assert [p.case_id for p in c.disappeared] == ["g/gone"]
    assert [p.case_id for p in c.new_cases] == ["g/new", "g/newbad"]
    assert c.gate_failed and not c.timing  # still failing (c) is neither new nor fixed


def test_no_overlap_and_untimed_runs():
    a = _run({("g/a", "k"): [1.0]})
    b = _run({("g/b", "k"): [1.0]})
    c = compare(a, b)
    assert not c.overlaps and not c.gate_failed
    untimed = compare(_run({("g/a", "k"): None}), _run({("g/a", "k"): None}))
    assert untimed.n_common == 1 and untimed.n_timed == 0


def test_a_later_run_replaces_an_item_of_an_earlier_one():
    early = _run({("g/a", "k"): [1.0, 1.0, 1.0]}, run_started="2026-01-01T00:00:00")
    late = _run({("g/a", "k"): [2.0, 2.0, 2.0]}, {("g/a", "k"): "fail"},
                run_started="2026-01-02T00:00:00")
    rows = regression.latest_rows(pd.concat([late, early], ignore_index=True))
    assert len(rows) == 1 and rows.verdict[0] == "fail"


def test_environment_differences_are_reported():
    a = _run({("g/a", "k"): [1.0]})
    b = a.assign(device_name="other")
    assert compare(a, b).env_differences == ("device_name: dev -> other",)
    # a baseline timed with the spin before each sample (schema 4 and older) is still
    # compared, and the change of pacing is named
    old, new = a.assign(timing_pacing="spacer"), a.assign(timing_pacing="hold")
    c = compare(old, new)
    assert c.env_differences == ("timing_pacing: spacer -> hold",) and c.n_timed == 1


def test_timings_after_different_flushes_are_not_compared():
    # a dirty flush makes every small case slower (docs/timing.md#l2-flush): a run
    # timed after the clean one must not read as a run of improvements
    slow, fast = [1.0, 1.01, 1.02, 1.03, 1.04], [0.5, 0.51, 0.52, 0.53, 0.54]
    base = _run({("g/a", "k"): slow, ("g/b", "k"): slow}).assign(l2_flush="dirty")
    cur = _run({("g/a", "k"): fast, ("g/b", "k"): fast}).assign(l2_flush="clean")
    cur.loc[cur.case_id == "g/b", "l2_flush"] = "dirty"
    c = compare(base, cur)
    assert c.n_common == 2 and c.n_timed == 1 and c.n_flush_differs == 1
    assert [t.case_id for t in c.improvements] == ["g/b"]  # same flush: compared
    assert c.env_differences == ("l2_flush: dirty -> clean, dirty",)
    # frames without the column (and unflushed CPU rows on both sides) compare as before
    assert compare(_run({("g/a", "k"): slow}), _run({("g/a", "k"): fast})).n_flush_differs == 0


def test_bad_verdicts_are_suite_verdicts():
    from bwd_suite.suite.verdicts import Verdict

    from bwd_suite.reports.items import VERDICTS

    values = {v.value for v in Verdict}
    assert regression.BAD_VERDICTS <= values
    assert set(VERDICTS) == values


# -- known failures, unexpected passes, failing new cases (issue 24) ------------------------

DECLARED = "padding ids are treated as an ordinary sequence id"


def _declare(df: pd.DataFrame, cases, why=DECLARED) -> pd.DataFrame:
    df = df.copy()
    df["known_failure"] = [why if c in cases else None for c in df["case_id"]]
    return df


def test_known_failures_are_expected_and_unexpected_passes_fail_the_gate():
    s = [1.0, 1.1, 1.2]
    items = ["g/kf", "g/xp", "g/dropped", "g/stale", "g/fixed"]
    base = _declare(_run({(c, "k"): s for c in items},
                         {("g/dropped", "k"): "fail", ("g/stale", "k"): "fail",
                          ("g/fixed", "k"): "fail"}),
                    {"g/dropped", "g/stale", "g/fixed"})
    cur = _declare(_run({**{(c, "k"): s for c in items}, ("g/newkf", "k"): s},
                        {("g/kf", "k"): "fail", ("g/dropped", "k"): "error",
                         ("g/newkf", "k"): "timeout"}),
                   {"g/kf", "g/xp", "g/newkf", "g/stale"})
    c = compare(base, cur)
    # declared and failing: expected, whether the case is new or passed before
    assert [(k.case_id, k.before, k.verdict) for k in c.known_failures] == [
        ("g/kf", "pass", "fail"), ("g/newkf", None, "timeout")]
    assert c.known_failures[0].known_failure == DECLARED
    # declared and passing: unexpected passes, whether it failed before or not
    assert [(k.case_id, k.before) for k in c.unexpected_passes] == [("g/stale", "fail"),
                                                                    ("g/xp", "pass")]
    # failed as declared before, fails undeclared now: a new failure
    assert [(v.case_id, v.before, v.after) for v in c.new_failures] == [
        ("g/dropped", "fail", "error")]
    assert [v.case_id for v in c.fixed_failures] == ["g/fixed"]  # the stale one is not fixed
    assert not c.failing_new_cases and c.gate_failed


def test_only_known_failures_keep_the_gate_open():
    s = [1.0, 1.1, 1.2, 1.3, 1.4]
    base = _run({("g/a", "k"): s, ("g/b", "k"): s})
    cur = _declare(_run({("g/a", "k"): s, ("g/b", "k"): s, ("g/new", "k"): s},
                        {("g/a", "k"): "fail", ("g/new", "k"): "fail"}), {"g/a", "g/new"})
    c = compare(base, cur)
    assert len(c.known_failures) == 2 and not c.new_failures and not c.failing_new_cases
    assert not c.gate_failed and c.exit_code() == 0
    # the same failures undeclared: a new failure and a failing new case, listed apart
    c = compare(base, cur.assign(known_failure=None))
    assert [v.case_id for v in c.new_failures] == ["g/a"]
    assert [v.case_id for v in c.failing_new_cases] == ["g/new"]
    assert c.gate_failed and c.exit_code() == 1


# -- the gate cannot pass vacuously ----------------------------------------------------------

def test_a_comparison_without_timed_items_says_why_and_exits_3():
    s = [1.0, 1.01, 1.02, 1.03, 1.04]
    a, b = _run({("g/a", "k"): s}), _run({("g/b", "k"): s})
    c = compare(a, b)
    assert c.exit_code() == regression.EXIT_NOT_COMPARED == 3
    assert c.vacuous_reason == "the runs share no (op, case, implementation)"
    # failing new cases do not turn an unrelated baseline into a regression
    assert compare(a, _run({("g/b", "k"): s}, {("g/b", "k"): "fail"})).exit_code() == 3

    untimed = compare(_run({("g/a", "k"): None}), _run({("g/a", "k"): None}))
    assert untimed.exit_code() == 3 and "was timed in both" in untimed.vacuous_reason
    assert untimed.exit_code(allow_untimed=True) == 0
    # a verdict failure still exits 1 first
    failing = compare(_run({("g/a", "k"): None}),
                      _run({("g/a", "k"): None}, {("g/a", "k"): "fail"}))
    assert failing.exit_code() == 1

    flush = compare(a.assign(l2_flush="dirty"), a.assign(l2_flush="clean"))
    assert flush.exit_code() == 3 and flush.n_flush_differs == 1
    assert "1 after different L2 flushes (dirty -> clean)" in flush.vacuous_reason
    device = compare(a, a.assign(device_name="NVIDIA A100"))
    assert device.exit_code() == 3 and device.n_device_differs == 1 and device.n_timed == 0
    assert "1 on different devices (dev -> NVIDIA A100)" in device.vacuous_reason
    same = compare(a, a.copy())
    assert same.exit_code() == 0 and same.vacuous_reason is None


def test_timings_on_another_device_are_not_compared():
    slow, fast = [1.0, 1.01, 1.02, 1.03, 1.04], [0.5, 0.51, 0.52, 0.53, 0.54]
    base = _run({("g/a", "k"): slow, ("g/b", "k"): slow})
    cur = _run({("g/a", "k"): fast, ("g/b", "k"): fast})
    cur.loc[cur.case_id == "g/a", "device_name"] = "other"
    c = compare(base, cur)
    assert c.n_timed == 1 and c.n_device_differs == 1 and c.n_timed_both == 2
    assert [t.case_id for t in c.improvements] == ["g/b"]
    assert c.device_pairs == ("dev -> other",)


def test_every_compared_item_has_its_ratio_and_p_flagged_ones_first():
    rng = random.Random(5)
    samples = {(f"g/c{i}", "k"): _samples(rng, 1e-3, 0.01) for i in range(6)}
    cur = dict(samples)
    cur[("g/c4", "k")] = [x * 1.5 for x in samples[("g/c4", "k")]]  # regression
    cur[("g/c1", "k")] = [x * 0.6 for x in samples[("g/c1", "k")]]  # improvement
    cur[("g/c2", "k")] = [x * 1.03 for x in samples[("g/c2", "k")]]  # inside the factor
    c = compare(_run(samples), _run(cur))
    assert len(c.compared) == c.n_timed == 6
    assert [(t.case_id, t.change) for t in c.compared[:3]] == [
        ("g/c4", Change.REGRESSION), ("g/c1", Change.IMPROVEMENT), ("g/c2", Change.UNCHANGED)]
    for t in c.compared:
        want = mann_whitney_u(cur[(t.case_id, "k")], samples[(t.case_id, "k")]).p
        assert t.p == pytest.approx(want)
    assert c.compared[2].p < 0.01 and not c.compared[2].flagged  # significant, within x1.1
    assert [t.case_id for t in c.timing] == ["g/c1", "g/c4"]  # beyond the factor, as before


# -- timings too noisy to compare: spread, host load ---------------------------------------

CPU = regression.CPU_TIMING_METHOD


def _timed_run(samples, host_load=None, method=CPU, iqr_share=None) -> pd.DataFrame:
    """A one-item run of a CPU (or `method`) timing with its host load and, where given,
    its IQR as a share of the median."""
    run = _run({("g/c", "k"): samples}).assign(timing_method=method, host_load=host_load)
    if iqr_share is not None:
        run = run.assign(time_iqr_s=iqr_share * run["time_median_s"])
    return run


def _tight(median, seed):
    return _samples(random.Random(seed), median, 0.01)


def test_a_threefold_slowdown_under_host_load_is_noisy_not_a_regression():
    base, slow = _tight(1e-3, 0), _tight(3e-3, 1)
    loaded = compare(_timed_run(base, 0.1), _timed_run(slow, 0.62))
    assert not loaded.regressions and not loaded.timing and not loaded.compared
    assert [(t.case_id, t.reason) for t in loaded.noisy] == [("g/c", "current host load 0.62")]
    assert loaded.noisy[0].ratio == pytest.approx(3, rel=0.05)
    # every timed item was noisy: nothing compared, and the reason says so
    assert loaded.n_timed == 0 and loaded.n_timed_both == 1
    assert loaded.exit_code() == regression.EXIT_NOT_COMPARED
    assert "1 too noisy to compare (current host load over 0.5 in 1)" in \
        loaded.vacuous_reason and "the timings were too noisy" in loaded.vacuous_reason
    # the same runs on an idle host: a regression
    idle = compare(_timed_run(base, 0.1), _timed_run(slow, 0.2))
    assert [t.change for t in idle.timing] == [Change.REGRESSION] and not idle.noisy
    assert idle.n_timed == 1 and idle.exit_code() == regression.EXIT_REGRESSED


def test_a_loaded_baseline_hides_an_improvement_too():
    c = compare(_timed_run(_tight(3e-3, 0), 0.8), _timed_run(_tight(1e-3, 1), 0.0))
    assert not c.improvements and [t.reason for t in c.noisy] == ["baseline host load 0.8"]


def test_host_load_rule_is_for_cpu_timings_and_a_missing_load_is_not_noisy():
    base, slow = _tight(1e-3, 0), _tight(3e-3, 1)
    gpu = compare(_timed_run(base, 0.9, "cuda_events"), _timed_run(slow, 0.9, "cuda_events"))
    assert [t.change for t in gpu.timing] == [Change.REGRESSION] and not gpu.noisy
    old = compare(_timed_run(base, None), _timed_run(slow, None))  # files before the column
    assert [t.change for t in old.timing] == [Change.REGRESSION] and not old.noisy
    bare = compare(_run({("g/c", "k"): base}), _run({("g/c", "k"): slow}))  # no columns
    assert [t.change for t in bare.timing] == [Change.REGRESSION] and not bare.noisy
    at_limit = compare(_timed_run(base, regression.MAX_HOST_LOAD),
                       _timed_run(slow, regression.MAX_HOST_LOAD))
    assert [t.change for t in at_limit.timing] == [Change.REGRESSION]


def test_a_wide_spread_on_either_side_is_noisy_on_any_device():
    base, slow = _tight(1e-3, 0), _tight(3e-3, 1)
    for method in (CPU, "cuda_events"):
        c = compare(_timed_run(base, method=method, iqr_share=0.8),
                    _timed_run(slow, method=method, iqr_share=0.05))
        assert not c.timing and [t.reason for t in c.noisy] == \
            ["baseline spread 0.8 of the median"]
    both = compare(_timed_run(base, 0.7, iqr_share=0.6), _timed_run(slow, iqr_share=2.5))
    assert [n.what for n in both.noisy[0].noise] == [regression.SPREAD, regression.HOST_LOAD,
                                                     regression.SPREAD]
    assert both.noisy[0].reason == ("baseline spread 0.6 of the median; baseline host load "
                                    "0.7; current spread 2.5 of the median")
    tight = compare(_timed_run(base, iqr_share=0.4), _timed_run(slow, iqr_share=0.4))
    assert [t.change for t in tight.timing] == [Change.REGRESSION] and not tight.noisy


def test_noisy_items_are_listed_apart_and_the_others_still_compared():
    from bwd_suite.reports.commands import compare as compare_command

    base = {("g/a", "k"): _tight(1e-3, 0), ("g/b", "k"): _tight(1e-3, 1)}
    cur = {("g/a", "k"): _tight(3e-3, 2), ("g/b", "k"): _tight(3e-3, 3)}
    loads = {"g/a": 0.9, "g/b": 0.1}
    b, c_run = (_run(s).assign(timing_method=CPU) for s in (base, cur))
    c_run = c_run.assign(host_load=c_run["case_id"].map(loads))
    c = compare(b, c_run)
    assert [t.case_id for t in c.regressions] == ["g/b"] and c.n_timed == 1
    assert [t.case_id for t in c.noisy] == ["g/a"] and c.exit_code() == 1
    assert c.vacuous_reason is None
    lines = compare_command.render(c)
    head = lines.index("\ntoo noisy to compare (spread or host load; not counted as timed) (1):")
    assert lines[head + 1].startswith(f"  x{c.noisy[0].ratio:.3f}  g/a  [k]  ")
    assert lines[head + 1].endswith("  current host load 0.9")
    assert compare_command.counts(c)["noisy"] == 1 and compare_command.counts(c)["timed"] == 1


# -- steps over many runs --------------------------------------------------------------------

def _series(rng, medians, n=20, noise=0.01):
    return [[m * (1 + rng.gauss(0, noise)) for _ in range(n)] for m in medians]


def _steps(medians, rule=Rule(), samples=None, seed=0):
    samples = _series(random.Random(seed), medians) if samples is None else samples
    meds = [sorted(s)[len(s) // 2] if s else m for s, m in zip(samples, medians)]
    return regression.detect_steps(meds, samples, rule)


def test_one_step_is_found_where_it_happens():
    steps = _steps([1.0] * 8 + [1.3] * 6)
    assert [s.index for s in steps] == [8]
    assert steps[0].ratio == pytest.approx(1.3, rel=0.02) and steps[0].slower
    assert steps[0].p < 1e-10


def test_a_step_up_and_back_down_are_two_steps():
    steps = _steps([1.0] * 5 + [2.0] * 5 + [1.0] * 5)
    assert [(s.index, s.slower) for s in steps] == [(5, True), (10, False)]


def test_noise_and_a_single_outlier_inside_the_series_are_no_step():
    rng = random.Random(7)
    night = [1 + rng.gauss(0, 0.02) for _ in range(20)]  # run-to-run noise within x1.1
    assert _steps(night) == []
    blip = [1.0] * 6 + [1.6] + [1.0] * 6
    assert _steps(blip) == []
    # one at the end may be the start of a step: tonight's run is flagged
    assert [s.index for s in _steps([1.0] * 12 + [1.6])] == [12]


def test_steps_need_significance_and_the_factor():
    # three samples a run cannot reach p < 0.01 with one run after the step
    few = _series(random.Random(1), [1.0, 1.0, 1.5], n=1)
    assert regression.detect_steps([s[0] for s in few], few) == []
    assert _steps([1.0] * 6 + [1.05] * 6) == []  # inside the factor
    assert [s.index for s in _steps([1.0] * 6 + [1.05] * 6, Rule(factor=1.02))] == [6]
    # without samples the medians alone decide
    assert [s.index for s in regression.detect_steps([1, 1, 1, 2, 2], [[]] * 5)] == [3]
    assert regression.detect_steps([1.0], [[1.0]]) == []
