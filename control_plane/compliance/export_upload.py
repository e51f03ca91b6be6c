"""An export archive sealed and uploaded at once.

The archive is sealed (``envelope.seal_stream``: AES-GCM chunk by chunk) in a thread of its
own, which hands the sealed bytes to the upload (``put_file``, in the caller's thread) through
a bounded queue: the two overlap, and the sealed archive is never written to a temporary file
and read back. At most ``DEPTH`` pieces of ``PIECE`` bytes wait between them, so memory stays
bounded at any size.

The upload sees the end of its source only once the archive was sealed whole: if sealing
fails, the upload's next read raises the sealing's error, so the bucket never keeps a
truncated archive (a create-only put that fails leaves nothing behind). If the upload fails,
the sealing thread is told to stop, and is waited for, before the error goes on.
"""

from __future__ import annotations

import queue
import threading
import uuid
from typing import IO

from storage_adapters import base as storage
from storage_adapters import envelope

PIECE = 1 << 20
DEPTH = 4


class _Stopped(Exception):
    """The upload ended before the sealing did: the sealing thread stops."""


class SealedSource:
    """The read side of the pipe (what ``put_file`` reads) and, for the sealing thread, its
    write side (what ``seal_stream`` writes to)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[bytes | BaseException | None] = queue.Queue(DEPTH)
        self._pending = bytearray()  # written, not yet handed over
        self._head = b""  # handed over, not yet read
        self._ended = False
        self._stopped = threading.Event()

    # -- the sealing thread's side ----------------------------------------------------------

    def write(self, data: bytes) -> int:
        self._pending += data
        if len(self._pending) >= PIECE:
            self._hand(bytes(self._pending))
            self._pending.clear()
        return len(data)

    def finish(self, error: BaseException | None) -> None:
        """The sealing ended: with ``error``, or whole (what is pending is handed over)."""
        try:
            if error is None and self._pending:
                self._hand(bytes(self._pending))
            self._hand(error)
        except _Stopped:
            pass

    def _hand(self, item: bytes | BaseException | None) -> None:
        while not self._stopped.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        raise _Stopped

    # -- the upload's side ------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            parts = [self._head]
            self._head = b""
            while piece := self._next():
                parts.append(piece)
            return b"".join(parts)
        while not self._head:
            piece = self._next()
            if not piece:
                return b""
            self._head = piece
        out, self._head = self._head[:size], self._head[size:]
        return out

    def _next(self) -> bytes:
        if self._ended:
            return b""
        item = self._queue.get()
        if isinstance(item, BaseException):
            self._ended = True
            raise item
        if item is None:
            self._ended = True
            return b""
        return item

    def stop(self) -> None:
        """The upload is over (done or failed): the sealing thread stops waiting for it."""
        self._stopped.set()


def seal_and_put(adapter: storage.StorageAdapter, path: str, plain: IO[bytes], size: int, *,
                 key_id: uuid.UUID, subject_key: bytes, context: bytes) -> None:
    """Seal ``size`` bytes of ``plain`` (positioned at their start) under ``subject_key`` and
    store them at ``path``, sealing and uploading side by side."""
    source = SealedSource()

    def seal() -> None:
        error: BaseException | None = None
        try:
            envelope.seal_stream(plain, source, size, key_id=key_id,  # type: ignore[arg-type]
                                 subject_key=subject_key, context=context)
        except _Stopped:
            return
        except BaseException as exc:  # handed to the upload, which raises it
            error = exc
        source.finish(error)

    sealer = threading.Thread(target=seal, name="memplane-export-seal", daemon=True)
    sealer.start()
    try:
        storage.put_file(adapter, path, source)  # type: ignore[arg-type]
    finally:
        source.stop()
        sealer.join()
