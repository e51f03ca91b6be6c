"""Random bytes from the operating system's generator, drawn a block at a time.

``os.urandom`` is a system call that lets go of the interpreter lock; on a busy server the
calling thread then waits until another thread hands the lock back (up to the interpreter's
switch interval, 5 ms). A write took a dozen of them (its ids, data key, nonces), each such
a wait. Here each thread takes them from a 4 KiB block of its own, read from the same
generator: every byte is the kernel's output, handed out once. A forked child draws a new
block before its first bytes, so it never repeats its parent's.
"""

from __future__ import annotations

import os
import threading

_BLOCK = 4096
_LARGE = 256  # bigger requests go straight to the kernel

# One block per thread (no lock to wait for); a fork moves the generation on, so the child's
# first request draws a new block.
_local = threading.local()
_generation = 0


def _forked() -> None:
    global _generation
    _generation += 1


os.register_at_fork(after_in_child=_forked)


def token_bytes(n: int) -> bytes:
    """``n`` bytes from the operating system's cryptographic generator (as ``os.urandom``)."""
    if n < 0:
        raise ValueError("a negative number of bytes")
    if n > _LARGE:
        return os.urandom(n)
    mine = _local
    block: bytes = getattr(mine, "block", b"")
    at: int = getattr(mine, "at", 0)
    if at + n > len(block) or getattr(mine, "generation", None) != _generation:
        block, at = os.urandom(_BLOCK), 0
        mine.block, mine.generation = block, _generation
    mine.at = at + n
    return block[at:at + n]
