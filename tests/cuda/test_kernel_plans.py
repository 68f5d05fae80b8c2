"""The launch plans of our LayerNorm, softmax, causal conv1d backward, cross-entropy and
AdamW kernels, on any machine with nvcc:
tests/cuda/csrc/plan_dump.cu links the ops' torch-free sources (their host planning code runs,
no device is touched; the launch code links against the kernels' explicit instantiations)
and prints the plan of each problem; here every plan is held to the rules the kernels rely on
(path choice, tile shape covering the row, block and shared-memory limits of sm_90, the
workspace and persistent-grid sizes, the cluster slices of a row, the chunk numbering of a
parameter list). A planning change that would launch an impossible or
wrong kernel fails CI although CI has no GPU."""

import itertools
import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NVCC = shutil.which("nvcc")
SMEM_LIMIT = 227 * 1024        # dynamic + static shared memory of one block, sm_90
LN_STATIC_SMEM = 2 * 32 * 8    # ln kernels' red[2][32] float2
THREADS_PER_SM = 1024          # at <= 64 registers a thread (the kernels' launch bounds)
LN_PIPED_16BIT = (16, 512)     # 16-bit piped rows: elements a thread, threads an SM (<= 128 regs)
FP32, FP16, BF16 = 0, 1, 2

pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found")


@pytest.fixture(scope="module")
def plan_dump(tmp_path_factory):
    from bwd_suite.kernels.adamw import cuda as adamw
    from bwd_suite.kernels.causal_conv1d import cuda as conv1d
    from bwd_suite.kernels.cross_entropy import cuda as cross_entropy
    from bwd_suite.kernels.layer_norm import cuda as layer_norm
    from bwd_suite.kernels.softmax import cuda as softmax

    exe = tmp_path_factory.mktemp("plans") / "plan_dump"
    # every source the extensions build but the torch bindings: a dispatch that reaches a
    # kernel no .cu instantiates fails to link
    srcs = [ROOT / "tests/cuda/csrc/plan_dump.cu"] + [
        s for op in (layer_norm, softmax, conv1d, cross_entropy, adamw) for s in op.SOURCES
        if not s.name.endswith("_binding.cpp")]
    # PTX only, unoptimised (-Xcicc -O0): the device code never runs and need neither go
    # through ptxas nor be optimised for host-side planning; the launch stubs and the link
    # against the explicit instantiations are the same (a quarter of the compile time)
    r = subprocess.run([NVCC, "-std=c++17", "-O1", "-gencode=arch=compute_90,code=compute_90",
                        "-Xcicc", "-O0", *map(str, srcs), "-o", str(exe)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]

    def run(lines):
        out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True,
                             text=True, timeout=120, check=True).stdout.splitlines()
        assert len(out) == len(lines)
        return [json.loads(o) for o in out]
    return run


def _pow2(v):
    return v > 0 and v & (v - 1) == 0


def _pow2_at_least(v):
    c = 1
    while c < v:
        c *= 2
    return c


def _ceil(a, b):
    return -(-a // b)


def _ln_problems():
    for rows, n, (xd, wd), affine, partials, mis, pad, sms in itertools.product(
            (1, 3, 37, 8192, (1 << 30) + 5),
            (1, 7, 8, 64, 77, 1000, 1001, 1024, 2048, 4096, 6000, 8192, 8193, 16384, 65539),
            ((FP32, FP32), (BF16, FP32), (FP16, FP16), (BF16, BF16)),
            (0, 1), (0, 1), (0, 2), (0, 5, 8), (132, 1)):
        if partials and not affine:
            continue
        yield (rows, n, xd, wd, affine, partials, mis, pad, sms)


def test_layer_norm_plans(plan_dump):
    problems = list(_ln_problems())
    plans = plan_dump(["ln " + " ".join(map(str, p)) for p in problems])
    bad = []
    for (rows, n, xd, wd, affine, partials, mis, pad, sms), q in zip(problems, plans):
        e = 4 if xd == FP32 else 8
        vec = mis == 0 and (n + pad) % e == 0
        piped = vec and n <= 8192 and rows < (1 << 30)
        max_tpr = 1024 if vec else 256
        streamed = not piped and n > max_tpr * 8
        per_thread, sm_threads = LN_PIPED_16BIT if piped and xd != FP32 else (8, THREADS_PER_SM)
        tpr, c, block, groups = q["tpr"], q["chunks"], q["block"], q["block"] // q["tpr"]
        checks = {
            "vectorized": q["vectorized"] == int(vec),
            "piped": q["piped"] == int(piped),
            "streamed": q["streamed"] == int(streamed),
            "tpr a power of two in [32, max]": _pow2(tpr) and 32 <= tpr <= max_tpr,
            "block": block == (max(tpr, 512) if piped else tpr if vec else 256)
                     and block % tpr == 0 and block <= 1024,
            "elements a thread at most": c * e <= per_thread,
            "the row fits (smallest tpr)": streamed or (
                tpr * c * e >= n and tpr == max(32, _pow2_at_least(_ceil(n, per_thread)))),
            "streamed spans": not streamed or tpr == max_tpr,
            "shared memory limit": q["smem"] + LN_STATIC_SMEM <= SMEM_LIMIT,
            "groups' column sums fit": not partials or streamed
                                       or q["smem"] >= groups * 2 * q["ws_row"] * 4,
            "ring of >= 2 stages fits": not piped or q["smem"] >= 2 * block * 2 * c * 16,
            "resident blocks fit the SM's threads": not piped or block <= sm_threads,
            "workspace row": q["ws_row"] == _ceil(n, 8) * 8,
            # at most the blocks resident at once (the scalar kernel's residency is by its
            # registers, up to 255 a thread: 2 blocks an SM assumed)
            "persistent grid": q["grid"] == q["parts"]
                               and 1 <= q["parts"] <= _ceil(rows, groups)
                               and q["parts"] <= sms * (max(1, sm_threads // block)
                                                        if vec else 2),
        }
        failed = [k for k, ok in checks.items() if not ok]
        if failed:
            bad.append((rows, n, xd, wd, affine, partials, mis, pad, sms, q, failed))
    assert not bad, f"{len(bad)} of {len(problems)} plans break a rule, e.g. {bad[:3]}"


def _sm_problems():
    for rows, n, dt, drop, mis, pad in itertools.product(
            (1, 13, 4096, 65536),
            (1, 2, 7, 64, 1000, 1024, 2048, 2049, 4096, 6000, 8192, 16384, 32768, 65536, 100003),
            (FP32, FP16, BF16), (0, 1), (0, 2), (0, 3, 8)):
        yield (rows, n, dt, drop, mis, pad)


def test_softmax_plans(plan_dump):
    problems = list(_sm_problems())
    plans = plan_dump(["sm " + " ".join(map(str, p)) for p in problems])
    bad = []
    for (rows, n, dt, drop, mis, pad), q in zip(problems, plans):
        v = 4 if dt == FP32 else 8
        nv = _ceil(n, v)
        rows_aligned = rows <= 1 or (n + pad) % v == 0
        vec = mis == 0 and rows_aligned
        c, block = q["chunks"], q["block"]
        if nv <= (64 if vec else 32 * 8):  # vectorized rows past 64 vectors: block rows
            checks = {
                "warp per row": q["warp_per_row"] == 1 and block == 128
                                and q["grid"] == _ceil(rows, 4),
                "chunks": c == _pow2_at_least(_ceil(nv, 32)) and c <= 8,
            }
        else:
            # the launch bounds: C = 1 (vectorized rows of 65-1024 vectors) one vector a
            # thread on up to 1024 threads; C = 2 (bf16 split rows), 4 and 8 at most 512
            # (vectorized) or 256 (scalar) threads
            cap = 1024 if c == 1 else 512 if vec else 256
            # split rows (last chunks through shared memory), vectorized, no dropout: bf16
            # rows of 513-1024 vectors at C = 2, fp32 rows of 1025-2048 at C = 4
            split = vec and not drop and (dt == BF16 and 512 < nv <= 1024
                                          or dt == FP32 and 1024 < nv <= 2048)
            checks = {
                "block per row": q["warp_per_row"] == 0 and q["grid"] == rows,
                "block": _pow2(block) and 128 <= block <= cap,
                "C = 1 exactly the vectorized rows of up to 1024 vectors, but split ones":
                    (c == 1) == (vec and nv <= 1024 and not split),
                "split": q["split"] == int(split) and (not split or block == 512),
                "C = 1 one vector a thread": c != 1 or block == _pow2_at_least(nv),
                # C = 2 only as bf16 split rows: 2 vectors on 512 threads
                "C = 2 split rows": (c == 2) == (split and dt == BF16),
                "chunks": c in (1, 2, 4, 8),
                "the row fits or streams": (not q["streamed"] and block * c * v >= n)
                                           or (q["streamed"] and c == 8 and block * 8 * v < n),
                # fp32 rows past 1024 vectors: C = 4 on 512 threads, 2 blocks an SM
                # (on 1024 threads at C = 2 one block an SM fit the registers)
                "fp32 C = 4": not (dt == FP32 and vec and 1024 < nv <= 2048)
                              or (c == 4 and block == 512),
            }
        checks["vectorized"] = q["vectorized"] == int(vec)
        checks["warp rows not split"] = not q["warp_per_row"] or not q["split"]
        failed = [k for k, ok in checks.items() if not ok]
        if failed:
            bad.append((rows, n, dt, drop, mis, pad, q, failed))
    assert not bad, f"{len(bad)} of {len(problems)} plans break a rule, e.g. {bad[:3]}"


GRID_X, GRID_YZ = (1 << 31) - 1, 65535  # CUDA's grid limits


def _conv_problems():
    big = (1 << 31) - 1  # the binding's limits: batch * dim and seqlen below 2^31
    for (b, d, t), k, dt, last, mis in itertools.product(
            ((1, 1, 1), (4, 2048, 512), (8, 4096, 2048), (2, 8192, 8192), (3, 77, 1001),
             (16, 1536, 4096), (1, 16, 100_000), (2, 96, 20_000),
             (1, 2, big - (1 << 16) + 1), (1, 64, 40_000_000), (65535, 8, 64),
             (1 << 20, 2, 64), (2, 1 << 29, 3)),
            (2, 4), (FP32, BF16), (0, 1), (0, 2)):
        if last and d > 1 and b > 65535:
            continue  # refused by the binding (kernels/causal_conv1d/cuda.py says why)
        yield (b, d, t, k, dt, last, mis)


def test_conv1d_plans(plan_dump):
    problems = list(_conv_problems())
    plans = plan_dump(["cv " + " ".join(map(str, p)) for p in problems])
    bad = []
    for (b, d, t, k, dt, last, mis), q in zip(problems, plans):
        gx, gy, gz = q["grid"]
        checks = {"grid limits": 1 <= gx <= GRID_X and 1 <= gy <= GRID_YZ and 1 <= gz <= GRID_YZ,
                  "block": q["block"] == 128}
        if not last or d == 1:  # one channel: time is contiguous either way
            e = 4 if dt == FP32 else 8
            ntiles = _ceil(t, 32 * e)
            tps = q["tiles_per_span"]
            checks.update({
                "channel-first": q["channel_first"] == 1,
                "rows: 4 warps a block": gx == _ceil(b * d, 4) and gz == 1,
                "spans cover the row": tps >= 1 and gy * tps >= ntiles and (gy - 1) * tps < ntiles,
                # 32 tiles, shorter (not below 8) only to give the GPU 4224 warps; longer
                # only where the y limit forces it
                "span length": tps == _ceil(ntiles, GRID_YZ) if _ceil(ntiles, GRID_YZ) > 32 else (
                    tps == min(ntiles, 32) or (tps in (8, 16) and tps < ntiles
                                               and b * d * _ceil(ntiles, 2 * tps) < 4224
                                               and (b * d * gy >= 4224 or tps == 8))),
                "workspace rows": q["parts"] == b * gy,
            })
        else:
            seg = q["seg_len"]
            forced = _ceil(t, 4 * GRID_YZ)  # the shortest segments the y limit allows
            checks.update({
                # 128 steps, shorter (not below 32) only to give the GPU 384 blocks
                "segment length": seg == forced if forced > 128 else (
                    seg in (32, 64, 128) and (seg == 128 or gx * gy * gz < 2 * 384)
                    and (gx * gy * gz >= 384 or seg == 32)),
                "channel-last": q["channel_first"] == 0,
                "channels": gx * 128 >= d and (gx - 1) * 128 < d,
                "segments cover the sequence": seg >= 1 and gy * 4 * seg >= t,
                "batches": gz == b,
                "workspace rows": q["parts"] == b * gy,
            })
        failed = [name for name, ok in checks.items() if not ok]
        if failed:
            bad.append((b, d, t, k, dt, last, mis, q, failed))
    assert not bad, f"{len(bad)} of {len(problems)} plans break a rule, e.g. {bad[:3]}"


MEAN, SUM, NONE = 0, 1, 2
CE_SLICE_TARGET, CE_SLICE_MAX, CE_MAX_CLUSTER = 64 * 1024, 200 * 1024, 8
INT_MAX = (1 << 31) - 1


def _ce_problems():
    for rows, vocab, dt, red, mis, pad, clusters in itertools.product(
            (1, 3, 8192, (1 << 28) + 1),
            (1, 7, 8, 1000, 4096, 32000, 50257, 128256, 151936, 262144, 1 << 20, 12_800_000),
            (FP32, FP16, BF16), (MEAN, SUM, NONE), (0, 2), (0, 3), (0, 1)):
        yield (rows, vocab, dt, red, mis, pad, clusters)


def test_cross_entropy_plans(plan_dump):
    problems = list(_ce_problems())
    plans = plan_dump(["ce " + " ".join(map(str, p)) for p in problems])
    bad = []
    for (rows, vocab, dt, red, mis, pad, clusters), q in zip(problems, plans):
        es = 4 if dt == FP32 else 2
        e = 16 // es
        vec = vocab % e == 0 and (vocab + pad) * es % 16 == 0 and mis % 16 == 0
        block = q["block"]
        accesses = vocab // (e if vec else 1)  # a streamed row's accesses
        checks = {
            "count: a mean": q["count"] == int(red == MEAN),
            "loss: a mean or sum": q["loss"] == int(red != NONE),
            "vectorized": q["vectorized"] == int(vec),
            # the streaming kernel, planned always (the fallback of a refused resident launch):
            # one block a row, about four accesses a thread, the fewest threads that give it
            "streamed rows: one block a row": q["grid"] == rows,
            "streamed block": _pow2(block) and 32 <= block <= 1024
                              and (block * 4 >= accesses or block == 1024)
                              and (block == 32 or block // 2 * 4 < accesses),
        }
        vecs = vocab * es // 16
        if vec and clusters:
            cluster = 1  # the fewest CTAs (a power of two, at most 8) holding 64 KB or less each
            while cluster < CE_MAX_CLUSTER and _ceil(vecs, cluster) * 16 > CE_SLICE_TARGET:
                cluster *= 2
            fits = _ceil(vecs, cluster) * 16 <= CE_SLICE_MAX and rows * cluster <= INT_MAX
        else:
            fits = False
        checks["resident: vectorized rows a cluster holds"] = q["resident"] == int(fits)
        if q["resident"]:
            c, sv = q["cluster"], q["slice_vecs"]
            checks.update({
                "cluster size": _pow2(c) and c <= CE_MAX_CLUSTER and c == cluster,
                "slices cover the row": c * sv >= vecs and (c - 1) * sv < vecs,
                "slice in shared memory": sv * 16 <= CE_SLICE_MAX <= SMEM_LIMIT,
                "grid limit": rows * c <= INT_MAX,
            })
        failed = [k for k, ok in checks.items() if not ok]
        if failed:
            bad.append((rows, vocab, dt, red, mis, pad, clusters, q, failed))
    assert not bad, f"{len(bad)} of {len(problems)} plans break a rule, e.g. {bad[:3]}"


ADAMW_CHUNK, ADAMW_THREADS = 16384, 256


def _adamw_problems():
    lists = ([], [1], [16384], [16385, 3, 0, 1 << 20], [7] * 40, [123_456_789, 5, 16384 * 3],
             [1 << 31, 1])
    for numels, max_grid, ams, master, field, mis in itertools.product(
            lists, (-1, 0, 1, 132, 264, 2048), (0, 1), (0, 1), (0, 1, 4, 5), (0, 4, 16)):
        # the misaligned pointer: in the first tensor (and every third one after it)
        tensors = [(n, field if i % 3 == 0 else 0, mis if i % 3 == 0 else 0)
                   for i, n in enumerate(numels)]
        yield (max_grid, ams, master, tensors)


def test_adamw_plans(plan_dump):
    problems = list(_adamw_problems())
    plans = plan_dump([f"aw {g} {a} {m} {len(ts)} " + " ".join(f"{n} {f} {x}" for n, f, x in ts)
                       for g, a, m, ts in problems])
    bad = []
    for (max_grid, ams, master, tensors), q in zip(problems, plans):
        chunks = [_ceil(n, ADAMW_CHUNK) for n, _, _ in tensors]
        begins = [sum(chunks[:i]) for i in range(len(chunks))]
        # null pointers (no amsgrad, no master) count as aligned
        used = {0: True, 1: True, 2: True, 3: True, 4: bool(ams), 5: bool(master)}
        aligned = [int(x % 16 == 0 or not used[f]) for _, f, x in tensors]
        grid = 0 if max_grid < 1 else min(max_grid, max(1, sum(chunks)))
        checks = {
            "chunks numbered in list order": q["chunk_begin"] == begins
                                             and q["n_chunks"] == sum(chunks),
            "aligned: every pointer 16-byte aligned": q["aligned"] == aligned,
            # every block resident at once (the grid synchronizes), none without a chunk
            "cooperative grid": q["grid"] == grid and q["grid"] <= max(max_grid, 0),
            "block": q["block"] == ADAMW_THREADS,
        }
        failed = [k for k, ok in checks.items() if not ok]
        if failed:
            bad.append((max_grid, ams, master, tensors, q, failed))
    assert not bad, f"{len(bad)} of {len(problems)} plans break a rule, e.g. {bad[:3]}"


def test_conv1d_cuda_declares_the_binding_limits():
    """The suite reports the shapes the binding refuses as unsupported, with the reason."""
    from bwd_suite.kernels.causal_conv1d import cuda as conv_cuda
    from bwd_suite.suite import registry

    impl = next(i for i in registry.implementations("causal_conv1d") if i.name == "cuda")
    base = dict(registry.op("causal_conv1d").params.defaults(), layout="channel_last")
    assert impl.supports(base) is None
    assert "width 5" in impl.supports(dict(base, width=5))
    assert "seqlen" in impl.supports(dict(base, seqlen=conv_cuda.MAX_SEQLEN + 1))
    assert impl.supports(dict(base, seqlen=conv_cuda.MAX_SEQLEN)) is None
    assert "batch 65536" in impl.supports(dict(base, batch=65536))
    assert impl.supports(dict(base, batch=65536, layout="channel_first")) is None
    assert impl.supports(dict(base, batch=65536, dim=1)) is None  # time-contiguous anyway
