"""Measure the device's copy bandwidth (bytes read + written per second, after a clean L2
flush) and store it per device name: the roofline columns' ceiling."""

from __future__ import annotations

HELP = "measure the device copy bandwidth (roofline ceiling)"


def add_arguments(p) -> None:
    p.add_argument("--device", metavar="DEV", help="default: cuda when available, else cpu")
    p.add_argument("--size-mib", type=int, metavar="MIB",
                   help="bytes copied per sample (default 2048 on CUDA, 256 on CPU)")


def main(args) -> int:
    from bwd_suite.suite import roofline
    from bwd_suite.suite.cli import at_least
    from bwd_suite.suite.selection import parse_device

    at_least(args, "size_mib", 1)
    dev = parse_device(args.device)
    size = args.size_mib * 2**20 if args.size_mib else None
    ceilings = roofline.calibrate(dev, size_bytes=size) if size else roofline.calibrate(dev)
    print(f"{ceilings.device_name}: copy bandwidth {ceilings.copy_gbps:.1f} GB/s "
          f"(read + write), saved to {roofline.calibration_path()}")
    return 0
