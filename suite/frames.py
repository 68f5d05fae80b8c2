"""Messages from a worker process to the run: length-prefixed JSON frames, never pickle.

A worker runs implementations, and an implementation may write anything into any file
descriptor its process holds, the worker's pipe to the run included. The run therefore
reads that pipe as untrusted bytes: each frame is a magic tag, a length and a JSON object;
anything else is a `CorruptStream`, which costs the worker's item, never the run (and
never executes code, as unpickling would).
"""

from __future__ import annotations

import json
import os
import struct

MAGIC = b"BWD\x01"
_HEADER = struct.Struct(">4sI")
MAX_FRAME = 64 << 20  # a row with every sample and error location is well under 1 MB


class CorruptStream(Exception):
    """Bytes on a worker's pipe that are not a frame of this protocol."""


def encode(message: dict) -> bytes:
    payload = json.dumps(message, separators=(",", ":")).encode()
    if len(payload) > MAX_FRAME:
        raise ValueError(f"a message of {len(payload)} bytes, more than {MAX_FRAME}")
    return _HEADER.pack(MAGIC, len(payload)) + payload


def write_all(fd: int, data: bytes) -> None:
    """Write every byte (a pipe write may be partial)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class FrameReader:
    """Frames out of the bytes of one pipe, as they arrive in pieces."""

    def __init__(self):
        self._buf = bytearray()

    @property
    def partial(self) -> bool:
        """Bytes of an unfinished frame are waiting."""
        return bool(self._buf)

    def feed(self, data: bytes) -> list:
        """The messages completed by `data`, in order; CorruptStream on bytes that are
        not a frame (a bad tag, an oversized length, a payload that is not a JSON
        object)."""
        self._buf += data
        out = []
        while self._buf:
            head = bytes(self._buf[:len(MAGIC)])
            if not MAGIC.startswith(head):
                raise CorruptStream(f"not a frame: {bytes(self._buf[:16])!r}")
            if len(self._buf) < _HEADER.size:
                break
            _, n = _HEADER.unpack_from(self._buf)
            if n > MAX_FRAME:
                raise CorruptStream(f"a frame of {n} bytes, more than {MAX_FRAME}")
            if len(self._buf) < _HEADER.size + n:
                break
            payload = bytes(self._buf[_HEADER.size:_HEADER.size + n])
            del self._buf[:_HEADER.size + n]
            try:
                message = json.loads(payload)
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise CorruptStream(f"a frame that is not JSON ({e})") from None
            if not isinstance(message, dict):
                raise CorruptStream(f"a frame holding {type(message).__name__}, not an "
                                    f"object")
            out.append(message)
        return out
