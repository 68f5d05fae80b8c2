"""The ports' manifest (manifest.toml beside this file) read, and a port as the
implementation `--impl OP=OBJECT` makes of it."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Optional

MANIFEST = Path(__file__).with_name("manifest.toml")


def ports(op: Optional[str] = None, names=None, path: Path = MANIFEST) -> list[dict]:
    """The manifest's ports (of `op`, or named), in its order; `path`: another manifest of
    the same form (the held-out ports)."""
    with open(path, "rb") as f:
        found = tomllib.load(f)["port"]
    return [p for p in found if (op is None or p["op"] == op)
            and (not names or p["name"] in names)]


def impl_text(port: dict) -> str:
    """What `--impl` takes: OP=module:object."""
    return f"{port['op']}={port['object']}"


def implementation(port: dict):
    """The port as the registry loads an external implementation (imported here, without
    the registry's probe in a child process: ours import)."""
    from bwd_suite.suite import registry

    return registry.external_implementation(impl_text(port), probe=False)


def reference(op: str):
    """The op's correct reference_port (not in the manifest), under the function name its
    ports share."""
    from bwd_suite.suite import registry

    fn = ports(op)[0]["object"].split(":")[1]
    return registry.external_implementation(f"{op}=tests.data.ports.{op}.reference_port:{fn}",
                                            probe=False)
