"""Random bytes from the operating system's generator, drawn a block at a time.

``os.urandom`` is a system call that lets go of the interpreter lock; on a busy server the
calling thread then waits until another thread hands the lock back (up to the interpreter's
switch interval, 5 ms). A write took a dozen of them (its ids, data key, nonces), each such
a wait. Here they come from one 4 KiB block read from the same generator: every byte is the
kernel's output, handed out once. A forked child starts with an empty block, so it never
repeats its parent's bytes.
"""

from __future__ import annotations

import os
import threading

_BLOCK = 4096
_LARGE = 256  # bigger requests go straight to the kernel


class _Pool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._block = b""
        self._at = 0

    def take(self, n: int) -> bytes:
        if n > _LARGE:
            return os.urandom(n)
        with self._lock:
            end = self._at + n
            if end > len(self._block):
                self._block, self._at, end = os.urandom(_BLOCK), 0, n
            taken = self._block[self._at:end]
            self._at = end
            return taken

    def forget(self) -> None:
        self._lock = threading.Lock()
        self._block, self._at = b"", 0


_pool = _Pool()
os.register_at_fork(after_in_child=_pool.forget)


def token_bytes(n: int) -> bytes:
    """``n`` bytes from the operating system's cryptographic generator (as ``os.urandom``)."""
    if n < 0:
        raise ValueError("a negative number of bytes")
    return _pool.take(n)
