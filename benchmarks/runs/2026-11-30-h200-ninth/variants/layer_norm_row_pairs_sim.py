"""Host model of rowpipe::stream_row_pairs' stage bookkeeping (layer_norm_row_pairs.patch):
every row is issued into a free stage, complete when worked, worked once, in order.
A check of the design, not of the CUDA code:  python3 layer_norm_row_pairs_sim.py"""

# simulate stream_row_pairs' stage bookkeeping for K stages and n rows of a group
def sim(K, n):
    stage_of = {}; pending = []  # rows issued, in commit order (None for empty groups)
    busy = {}  # stage -> row held (issued, not yet processed)
    def issue(s, r):
        assert s not in busy, (K, n, 'stage busy', s, busy[s], r)
        busy[s] = r; stage_of[r] = s
    for s in range(K - 2):
        if s < n: issue(s, s)
        pending.append(s if s < n else None)
    stage = 0; processed = []
    for i in range(0, n, 2):
        sa2 = stage - 2 if stage >= 2 else stage - 2 + K
        sa3 = 0 if sa2 + 1 == K else sa2 + 1
        a2, a3 = i + K - 2, i + K - 1
        if a2 < n: issue(sa2, a2)
        pending.append(a2 if a2 < n else None)
        if a3 < n: issue(sa3, a3)
        pending.append(a3 if a3 < n else None)
        done = pending[:len(pending) - (K - 2)]  # wait<K-2>
        sb = 0 if stage + 1 == K else stage + 1
        rows = [i, i + 1] if i + 1 < n else [i]
        for r, s in zip(rows, [stage, sb]):
            assert r in done, (K, n, 'not complete', r)
            assert stage_of[r] == s and busy.get(s) == r, (K, n, 'wrong stage', r, s)
            del busy[s]; processed.append(r)
        stage = 0 if sb + 1 == K else sb + 1
    assert processed == list(range(n)), processed
for K in (3, 4, 5):
    for n in range(0, 40): sim(K, n)
print("ok")
