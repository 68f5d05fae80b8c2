"""The regression rule: the Mann-Whitney U test against textbook values and a brute-force
permutation check of its tie correction, the factor-and-p rule on synthetic samples, and
the verdict changes and presence lists between two runs."""

import itertools
import math
import random

import pandas as pd
import pytest

from suite import regression
from suite.regression import Change, Rule, compare, mann_whitney_u


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
        ("g/a", "pass", "fail"), ("g/u", "unsupported", "error"), ("g/newbad", None, "error")]
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
    from suite.verdicts import Verdict

    from reports.items import VERDICTS

    values = {v.value for v in Verdict}
    assert regression.BAD_VERDICTS <= values
    assert set(VERDICTS) == values
