"""Reads from a bucket bounded in size and in time: a tenant's bucket is a hostile party.

Every object read names the most bytes the object may have (``max_bytes``: for a memory, the
sealed size its pointer's ``content_size`` allows, see ``envelope.sealed_size``) and every
storage call has an overall deadline (``MEMPLANE_STORAGE_CALL_DEADLINE_SECONDS``). One
implementation serves every backend: :func:`bounded_pieces` reads an HTTP body (or a file)
a piece at a time with ``read1`` — whatever has arrived, never waiting for a full buffer —
so that between two pieces it can

- refuse a body whose announced length (``Content-Length``) is over the bound before reading
  any of it, and stop as soon as the bytes that arrived pass the bound, having read at most
  one byte more (:class:`ObjectTooLarge`, an :class:`IntegrityError`: the control plane
  answers it as it answers a bad checksum, 409 ``hash_mismatch``, and marks a memory
  corrupt);
- stop when the call's deadline has passed (:class:`DeadlineExceeded`, a
  :class:`StorageUnavailable`: 503 ``storage_unavailable``), however slowly the bytes
  trickle in: the backend's per-read timeout bounds the wait for the next byte, the deadline
  bounds them all.

The caller closes the response in a ``finally``, so the connection is dropped (never put
back in a pool half read) when a read stops early.

A streamed read of a large object (``iter_chunks``: export archives) gets a *progress*
deadline instead: each ``progress_bytes`` (a part, 8 MiB) must arrive within the deadline,
so a read of N parts takes at most N deadlines — bounded, since N is bounded by
``max_bytes``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from .base import IntegrityError
from .deadlines import DeadlineExceeded, object_body

DEFAULT_CALL_DEADLINE_SECONDS = 30.0
"""How long one storage call may take in all (overridden by the server's setting)."""

READ_STEP_BYTES = 256 << 10
"""The most one ``read1`` of a body asks for."""


class ObjectTooLarge(IntegrityError):
    """The backend announced or sent more bytes than the object may have; nothing of it was
    kept."""


class Deadline:
    """The moment a storage call must be over by (a monotonic clock)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.ends = time.monotonic() + self.seconds

    def remaining(self) -> float:
        return self.ends - time.monotonic()

    def check(self, where: str) -> None:
        if self.remaining() <= 0:
            raise DeadlineExceeded(f"{where}: the storage call took longer than its "
                                   f"{self.seconds:g} s deadline")

    def renew(self) -> None:
        self.ends = time.monotonic() + self.seconds


def check_announced(length: Any, max_bytes: int | None, where: str) -> None:
    """Refuse an answer whose announced length (a Content-Length) is over ``max_bytes``."""
    if max_bytes is None or length is None:
        return
    try:
        announced = int(length)
    except (TypeError, ValueError):
        return  # a length that is not a number: the bytes are counted anyway
    if announced > max_bytes:
        raise ObjectTooLarge(f"{where}: the backend announced {announced} bytes, more than "
                             f"the {max_bytes} the object may have")


def bounded_pieces(read1: Callable[[int], bytes], *, max_bytes: int | None,
                   deadline: Deadline, where: str, announced: Any = None,
                   progress_bytes: int | None = None) -> Iterator[bytes]:
    """The body ``read1`` reads, piece by piece, until it ends (``b""``).

    ObjectTooLarge once more than ``max_bytes`` arrived (or were announced); DeadlineExceeded
    when ``deadline`` passes first (renewed after each ``progress_bytes``, if given). Errors
    of ``read1`` itself are the caller's to translate.
    """
    check_announced(announced, max_bytes, where)
    got = since_renewal = 0
    while True:
        deadline.check(where)
        want = READ_STEP_BYTES if max_bytes is None else min(READ_STEP_BYTES,
                                                             max_bytes - got + 1)
        if max_bytes is None:
            piece = read1(want)
        else:
            with object_body():  # bounded here, so past the connections' ceiling
                piece = read1(want)
        if not piece:
            return
        got += len(piece)
        if max_bytes is not None and got > max_bytes:
            raise ObjectTooLarge(f"{where}: the backend sent more than the {max_bytes} bytes "
                                 "the object may have")
        if progress_bytes is not None:
            since_renewal += len(piece)
            if since_renewal >= progress_bytes:
                deadline.renew()
                since_renewal = 0
        yield bytes(piece)


def read_bounded(read1: Callable[[int], bytes], *, max_bytes: int | None,
                 deadline: Deadline, where: str, announced: Any = None) -> bytes:
    """All of :func:`bounded_pieces`, joined."""
    return b"".join(bounded_pieces(read1, max_bytes=max_bytes, deadline=deadline,
                                   where=where, announced=announced))


def urllib3_read1(response: Any) -> Callable[[int], bytes]:
    """``read1`` of a urllib3 response, the bytes as sent (a ``Content-Encoding`` is not
    undone: a compressed body cannot grow past the bound once read)."""
    def read1(amt: int) -> bytes:
        return bytes(response.read1(amt, decode_content=False))
    return read1


def file_pieces(handle: Any, max_bytes: int | None, where: str, chunk_size: int
                ) -> Iterator[bytes]:
    """A local file's bytes in chunks of ``chunk_size``, at most ``max_bytes`` of them (its
    size is checked first; a file that grows meanwhile is still cut at the bound)."""
    import os

    check_announced(os.fstat(handle.fileno()).st_size, max_bytes, where)
    got = 0
    while chunk := handle.read(chunk_size if max_bytes is None
                               else min(chunk_size, max_bytes - got + 1)):
        got += len(chunk)
        if max_bytes is not None and got > max_bytes:
            raise ObjectTooLarge(f"{where}: the file has more than the {max_bytes} bytes "
                                 "the object may have")
        yield bytes(chunk)
