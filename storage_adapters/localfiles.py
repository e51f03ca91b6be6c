"""The file-system calls a local bucket's writes are made of: writing an object's bytes,
naming an unnamed (``O_TMPFILE``) file, temporary file names, and flushing to disk (Linux's
``syncfs``, or fsyncs side by side)."""

from __future__ import annotations

import ctypes
import itertools
import os
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

CHUNK = 1 << 20
# O_TMPFILE (it includes O_DIRECTORY) where the platform defines it.
UNNAMED_FLAGS: int | None = (os.O_TMPFILE | os.O_WRONLY) if hasattr(os, "O_TMPFILE") else None
_TMP_PREFIX = uuid.uuid4().hex[:16]
_tmp_count = itertools.count()


def write_into(fd: int, data: bytes | BinaryIO) -> None:
    """Write bytes, or a file's content copied in chunks (memory bounded at any size)."""
    if isinstance(data, bytes | bytearray | memoryview):
        _write_all(fd, data)
        return
    while chunk := data.read(CHUNK):
        _write_all(fd, chunk)


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write all of ``data``: ``write`` may take only a part (a disk filling up, Linux's
    limit of about 2 GiB a call) and says how much; the rest is written after it (or the
    next call raises, as on a full disk), so a short write never links a truncated object."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def link_unnamed(fd: int, target: str) -> None:
    """Give the unnamed file open as ``fd`` the name ``target``: ``linkat`` following
    ``/proc/self/fd/N`` (no privilege needed, unlike ``AT_EMPTY_PATH``). Python calls
    ``linkat`` only when given a directory descriptor; the source path is absolute, so the
    kernel never looks at the one passed."""
    os.link(f"/proc/self/fd/{fd}", target, src_dir_fd=fd, follow_symlinks=True)


def tmp_name() -> str:
    """A temporary file's name, unique without a system call: this process's random prefix,
    its pid (a forked child shares the prefix, not the pid) and a counter."""
    return f"{_TMP_PREFIX}-{os.getpid()}-{next(_tmp_count)}"


def _find_syncfs() -> Any:
    """Linux's ``syncfs(2)`` through the C library (ctypes releases the interpreter while it
    waits), or None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        found = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    found.argtypes = [ctypes.c_int]
    found.restype = ctypes.c_int
    return found


syncfs = _find_syncfs()
_flushers: ThreadPoolExecutor | None = None
_flushers_lock = threading.Lock()


def fsync_all(paths: list[str]) -> None:
    """fsync every file or directory in ``paths``, side by side (the calls wait on the
    disk, not on the interpreter); the first failure is raised once all have ended. One
    path is fsynced in the calling thread: handing it to another thread and waiting for it
    costs two thread switches and gains nothing (a new key's put flushes one directory)."""
    global _flushers
    if len(paths) == 1:
        fsync_path(paths[0])
        return
    with _flushers_lock:
        if _flushers is None:
            _flushers = ThreadPoolExecutor(max_workers=16, thread_name_prefix="memplane-fsync")
    errors = [e for e in _flushers.map(_fsync_quietly, paths) if e is not None]
    if errors:
        raise errors[0]


def _fsync_quietly(path: str) -> OSError | None:
    try:
        fsync_path(path)
    except OSError as exc:
        return exc
    return None


def fsync_path(path: str | Path) -> None:
    """fsync a file or a directory (opened read-only: either can be)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
