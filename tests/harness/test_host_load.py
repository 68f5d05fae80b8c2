"""suite/host_load.py: the other processes' share of the cores, from fake /proc/stat
readings (no timed assertions: the arithmetic and the parsing are checked exactly)."""

import os

import pytest

from bwd_suite.suite import host_load
from bwd_suite.suite.host_load import HostLoadMeter, Reading, busy_ticks, other_share, window_start

# Two cores; columns: user nice system idle iowait irq softirq steal guest guest_nice.
# Busy: user + nice + system + irq + softirq + steal (guest is inside user already).
STAT = """cpu  300 10 50 9000 40 5 5 0 99 0
cpu0 100 10 20 4500 20 2 3 0 50 0
cpu1 200 0 30 4500 20 3 2 0 49 0
intr 12345 0 0
ctxt 999
"""


def test_busy_ticks_counts_the_busy_columns_of_the_aggregate_line():
    # 300 + 10 + 50 + 5 + 5 + 0: idle, iowait and guest left out
    assert busy_ticks(STAT) == (370, 2)
    assert busy_ticks(STAT, cpus={0, 1}) == (370, 2)


def test_busy_ticks_of_the_cores_a_process_may_use():
    assert busy_ticks(STAT, cpus={1}) == (235, 1)  # 200 + 30 + 3 + 2
    assert busy_ticks(STAT, cpus={0, 7}) == (135, 1)  # a core not listed is not counted
    with pytest.raises(ValueError):
        busy_ticks(STAT, cpus={7})
    with pytest.raises(ValueError):
        busy_ticks("intr 1 2 3\n")


def _reading(wall_s, busy_s, own_s, cores=2):
    return Reading(wall_s=wall_s, busy_s=busy_s, cores=cores, own_s=own_s)


def test_other_share_subtracts_our_own_cpu_time():
    # 1 s on 2 cores: 1.6 core-seconds busy, 0.9 of them ours -> others kept 0.35 busy
    before, after = _reading(10.0, 100.0, 5.0), _reading(11.0, 101.6, 5.9)
    assert other_share(before, after) == pytest.approx(0.35)
    # alone on the host: the busy time is ours
    assert other_share(before, _reading(11.0, 100.9, 5.9)) == pytest.approx(0.0)
    # another process on the second core the whole second
    assert other_share(before, _reading(11.0, 101.9, 5.9)) == pytest.approx(0.5)


def test_other_share_is_clamped_to_a_share():
    before = _reading(0.0, 100.0, 0.0)
    assert other_share(before, _reading(1.0, 100.0, 0.3)) == 0.0  # ticks behind our clock
    assert other_share(before, _reading(1.0, 103.0, 0.0)) == 1.0  # ticks ahead of the wall


def test_other_share_is_none_where_it_cannot_be_read():
    before = _reading(0.0, 100.0, 0.0)
    assert other_share(before, _reading(1.0, None, 0.5, cores=0)) is None
    assert other_share(_reading(0.0, None, 0.0, cores=0), _reading(1.0, 101.0, 0.5)) is None
    assert other_share(before, _reading(1.0, 101.0, 0.5, cores=4)) is None  # cores changed
    # a window of a few ticks cannot tell idle from loaded: one tick would be the machine
    assert other_share(before, _reading(0.002, 100.01, 0.002)) is None
    assert other_share(before, _reading(0.2, 100.2, 0.1), min_window_s=0.1) == \
        pytest.approx(0.25)


def test_read_parses_a_stat_file_and_says_none_when_it_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(host_load.os, "sysconf", lambda name: 100)
    monkeypatch.setattr(host_load, "_allowed_cpus", lambda: {0, 1})
    stat = tmp_path / "stat"
    stat.write_text(STAT)
    r = host_load.read(str(stat))
    assert r.busy_s == pytest.approx(3.7) and r.cores == 2
    missing = host_load.read(str(tmp_path / "nothing"))
    assert missing.busy_s is None and missing.cores == 0


def _fake_reads(monkeypatch, *readings):
    """The meter's readings, in turn; a fresh history of earlier readings."""
    it = iter(readings)
    monkeypatch.setattr(host_load, "read", lambda path: next(it))
    monkeypatch.setattr(host_load, "_recent", host_load.deque(maxlen=64))
    monkeypatch.setattr(host_load, "_min_window_s", lambda: 0.05)


def test_meter_reports_the_share_between_its_two_readings(monkeypatch):
    _fake_reads(monkeypatch, _reading(0.0, 100.0, 1.0), _reading(2.0, 102.4, 2.0))
    with HostLoadMeter() as meter:
        assert meter.share is None
    # 2 s on 2 cores: 2.4 core-seconds busy, 1.0 ours -> 1.4 / 4
    assert meter.share == pytest.approx(0.35)


def test_window_start_widens_a_short_window_backwards_within_the_lookback():
    before, after = _reading(10.0, 0, 0), _reading(10.01, 0, 0)
    earlier = [_reading(t, 0, 0) for t in (8.0, 9.5, 9.9, 9.97)]
    assert window_start(before, earlier, after, 0.05) is earlier[2]  # latest >= 50 ms old
    assert window_start(_reading(9.0, 0, 0), earlier, after, 0.05).wall_s == 9.0  # long
    assert window_start(before, earlier[:1], after, 0.05) is None  # 2 s: too old
    assert window_start(before, earlier[:1], after, 0.05, max_lookback_s=5) is earlier[0]
    assert window_start(before, [], after, 0.05) is None


def test_a_short_meter_reads_from_the_previous_ones_readings(monkeypatch):
    # first meter: 0.5 s, others kept one core of two busy; second: 2 ms right after it
    _fake_reads(monkeypatch, _reading(0.5, 100.0, 0.0), _reading(1.0, 100.75, 0.25),
                _reading(1.001, 100.75, 0.25), _reading(1.003, 100.76, 0.252))
    with HostLoadMeter() as first:
        pass
    with HostLoadMeter() as second:
        pass
    assert first.share == pytest.approx(0.5)
    # not from the first meter's end (3 ms: too short) but its start: 0.503 s
    assert second.share == pytest.approx((0.76 - 0.252) / (0.503 * 2))
    # nothing recent enough: no load
    _fake_reads(monkeypatch, _reading(5.0, 100.0, 0.0), _reading(5.002, 100.0, 0.002))
    with HostLoadMeter() as alone:
        pass
    assert alone.share is None


def test_readings_without_a_busy_time_are_not_kept(monkeypatch):
    _fake_reads(monkeypatch, _reading(0.0, None, 0.0, cores=0),
                _reading(1.0, None, 0.5, cores=0))
    with HostLoadMeter() as meter:
        pass
    assert meter.share is None and not host_load._recent


def test_this_hosts_proc_stat_is_read():
    if not os.path.exists(host_load.PROC_STAT):
        pytest.skip("no /proc/stat here")
    r = host_load.read()
    assert r.busy_s > 0 and 1 <= r.cores <= (os.cpu_count() or r.cores)
