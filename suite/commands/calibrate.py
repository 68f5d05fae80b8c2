"""Measure the device's ceilings and store them per device name: its copy bandwidth (bytes
read + written per second, after a clean L2 flush) and, on CUDA, its dense GEMM rate in
bf16, fp16 and fp32 (TF32 off): the roofline columns' memory and compute ceilings."""

from __future__ import annotations

HELP = "measure the device copy bandwidth and GEMM rates (roofline ceilings)"


# suite.roofline.GEMM_SIZE, for the help text: building the parser imports no torch
GEMM_SIZE = 8192


def add_arguments(p) -> None:
    p.add_argument("--device", metavar="DEV", help="default: cuda when available, else cpu")
    p.add_argument("--size-mib", type=int, metavar="MIB",
                   help="bytes copied per sample (default 2048 on CUDA, 256 on CPU)")
    p.add_argument("--gemm-size", type=int, metavar="N",
                   help=f"CUDA: the square matmul timed per dtype, N x N x N (default "
                        f"{GEMM_SIZE}; halved while its operands do not fit)")


def lines(ceilings, device) -> list:
    """What a calibration holds, a line per ceiling."""
    out = [f"{ceilings.device_name}: copy bandwidth "
           + (f"{ceilings.copy_gbps:.1f} GB/s (read + write)" if ceilings.copy_gbps
              else "not measured")]
    for dtype, tflops in sorted(ceilings.gemm_tflops.items()):
        out.append(f"{ceilings.device_name}: {dtype} GEMM {tflops:.1f} TFLOP/s"
                   + (" (TF32 off)" if dtype == "float32" else ""))
    if device.type != "cuda":
        out.append(f"{ceilings.device_name}: no GEMM rate on {device.type} (CUDA only): "
                   f"compute-bound fractions stay empty")
    return out


def main(args) -> int:
    from bwd_suite.suite import roofline
    from bwd_suite.suite.cli import at_least
    from bwd_suite.suite.selection import parse_device

    at_least(args, "size_mib", 1)
    at_least(args, "gemm_size", 1)
    dev = parse_device(args.device)
    size = args.size_mib * 2**20 if args.size_mib else None
    ceilings = roofline.calibrate(dev, size, gemm_size=args.gemm_size or roofline.GEMM_SIZE)
    for line in lines(ceilings, dev):
        print(line)
    print(f"saved to {roofline.calibration_path()}")
    return 0
