"""The operating-system calls a local bucket's writes are made of (storage_adapters/localfiles),
each held by a spy at that boundary: an object's bytes written whole even when the disk takes
them in parts, a stream copied in pieces of 1 MiB, an unnamed file named through ``/proc``,
the fsync of a path (through a read-only descriptor it closes), fsyncs side by side (16 at
once, the first failure raised after all have ended), Linux's ``syncfs`` found, and the
temporary names. A killed process keeps the page cache, so only such spies show these calls."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import io
import os
import re
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from storage_adapters import localfiles
from storage_adapters.base import ObjectNotFound, StorageUnavailable
from storage_adapters.local import LocalAdapter

MiB = 1 << 20


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _write_spy(monkeypatch: pytest.MonkeyPatch, root: Path, *, at_most: int,
               full_after: int | None = None) -> list[int]:
    """``os.write`` into the bucket ``root`` (by this thread) takes at most ``at_most``
    bytes a call, as a disk filling up or a signal makes it; after ``full_after`` bytes it
    raises ENOSPC. Returns the sizes written, call by call."""
    real = os.write
    mine = threading.get_ident()
    sizes: list[int] = []

    def write(fd: int, data: Any) -> int:
        if threading.get_ident() != mine or not os.readlink(
                f"/proc/self/fd/{fd}").startswith(str(root)):
            return real(fd, data)
        if full_after is not None and sum(sizes) >= full_after:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = real(fd, bytes(memoryview(data)[:at_most]))
        sizes.append(written)
        return written

    monkeypatch.setattr(os, "write", write)
    return sizes


@pytest.mark.parametrize("call", ["put", "put_file"])
def test_a_put_the_disk_takes_in_parts_stores_the_whole_object(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    """``write`` may write less than it was given and say so: the rest follows, never a
    truncated object linked into place and acknowledged."""
    adapter = LocalAdapter(tmp_path / "b")
    data = bytes(range(256)) * 4 + b"tail"
    sizes = _write_spy(monkeypatch, adapter.root, at_most=300)
    if call == "put":
        adapter.put("t/k/v1", data)
    else:
        adapter.put_file("t/k/v1", io.BytesIO(data))
    assert sizes == [300, 300, 300, 128]
    assert adapter.get("t/k/v1") == data
    adapter.close()


@pytest.mark.parametrize("call", ["put", "put_file"])
def test_a_put_on_a_disk_that_fills_mid_object_fails_and_links_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    adapter = LocalAdapter(tmp_path / "b")
    sizes = _write_spy(monkeypatch, adapter.root, at_most=10, full_after=10)
    with pytest.raises(StorageUnavailable, match="^local write failed: No space left on device$"):
        if call == "put":
            adapter.put("t/k/v1", b"more than ten bytes")
        else:
            adapter.put_file("t/k/v1", io.BytesIO(b"more than ten bytes"))
    assert sizes == [10]
    with pytest.raises(ObjectNotFound):
        adapter.get("t/k/v1")
    assert list((adapter.root / ".memplane-tmp").iterdir()) == []
    adapter.close()


def test_a_stream_is_copied_in_pieces_of_one_mebibyte(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory stays bounded at any size: each read asks for 1 MiB, each write is one piece."""
    asked: list[int] = []

    class Counting(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            asked.append(-1 if size is None else size)
            return super().read(size)

    adapter = LocalAdapter(tmp_path / "b")
    data = os.urandom(2 * MiB + MiB // 2)
    sizes = _write_spy(monkeypatch, adapter.root, at_most=4 * MiB)
    adapter.put_file("t/big", Counting(data))
    assert asked == [MiB] * 4
    assert sizes == [MiB, MiB, MiB // 2]
    assert adapter.get("t/big") == data
    adapter.close()


def test_a_temporary_name_is_the_process_prefix_its_pid_and_a_counter() -> None:
    first, second = localfiles.tmp_name(), localfiles.tmp_name()
    one = re.fullmatch(r"([0-9a-f]{16})-(\d+)-(\d+)", first)
    two = re.fullmatch(r"([0-9a-f]{16})-(\d+)-(\d+)", second)
    assert one is not None and two is not None, (first, second)
    assert one[1] == two[1] == localfiles._TMP_PREFIX
    assert int(one[2]) == int(two[2]) == os.getpid()
    assert int(two[3]) == int(one[3]) + 1


def test_linux_has_syncfs_from_its_c_library(tmp_path: Path) -> None:
    """A batch's one flush: found on Linux (and only there), callable on a descriptor."""
    found = localfiles._find_syncfs()
    assert (found is not None) == sys.platform.startswith("linux")
    assert (localfiles.syncfs is not None) == sys.platform.startswith("linux")
    if found is None:
        return
    assert (found.argtypes, found.restype) == ([ctypes.c_int], ctypes.c_int)
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        assert found(fd) == 0
    finally:
        os.close(fd)
    # A failure leaves its errno where ctypes.get_errno() reads it (the error put_many
    # answers), not a stale one.
    ctypes.set_errno(0)
    assert found(-1) == -1
    assert ctypes.get_errno() == errno.EBADF


class _NoSyncfs:
    """A C library without ``syncfs`` (an old glibc, musl before 1.1)."""


def _no_library(*args: Any, **kwargs: Any) -> Any:
    raise OSError("no C library to load")


@pytest.mark.parametrize("where", ["another platform", "no C library", "no syncfs in it"])
def test_without_syncfs_a_batch_falls_back_to_fsyncs(monkeypatch: pytest.MonkeyPatch,
                                                      where: str) -> None:
    if where == "another platform":
        monkeypatch.setattr(localfiles, "sys", SimpleNamespace(platform="darwin"))
    elif where == "no C library":
        monkeypatch.setattr(ctypes, "CDLL", _no_library)
    else:
        monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: _NoSyncfs())
    assert localfiles._find_syncfs() is None


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_fsync_path_flushes_through_a_read_only_descriptor_it_closes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    path = tmp_path / "x"
    if kind == "file":
        path.write_bytes(b"data")
    else:
        path.mkdir()
    seen: list[tuple[int, int]] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        # only this test's: other tests' threads in this process may flush their own files
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path)):
            seen.append((os.fstat(fd).st_ino, fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    before = _open_fds()
    localfiles.fsync_path(path)
    localfiles.fsync_path(str(path))
    assert seen == [(path.stat().st_ino, os.O_RDONLY)] * 2
    assert _open_fds() == before


def test_a_failed_fsync_is_raised_and_its_descriptor_closed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    before = _open_fds()
    with pytest.raises(OSError, match="Input/output error"):
        localfiles.fsync_path(tmp_path)
    assert _open_fds() == before


def test_fsync_all_flushes_every_path_side_by_side_sixteen_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """17 directories: 16 are flushed at once (each waits for 16 to have started, then up to
    0.2 s more for a 17th), the 17th when one of them ends."""
    paths = [tmp_path / f"d{n}" for n in range(17)]
    for path in paths:
        path.mkdir()
    wanted = {p.stat().st_ino for p in paths}
    lock = threading.Condition()
    state = {"started": 0, "active": 0, "most": 0}
    flushed: list[tuple[int, str]] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        inode = os.fstat(fd).st_ino
        if inode not in wanted:
            real(fd)
            return
        with lock:
            state["started"] += 1
            state["active"] += 1
            state["most"] = max(state["most"], state["active"])
            lock.notify_all()
            lock.wait_for(lambda: state["started"] >= 16, timeout=5)
            lock.wait_for(lambda: state["started"] == len(paths), timeout=0.2)
        real(fd)
        flushed.append((inode, threading.current_thread().name))
        with lock:
            state["active"] -= 1

    monkeypatch.setattr(os, "fsync", fsync)
    localfiles.fsync_all([str(p) for p in paths])
    assert state["most"] == 16
    assert sorted(inode for inode, _ in flushed) == sorted(wanted)
    assert all(name.startswith("memplane-fsync") for _, name in flushed), flushed


def test_fsync_all_raises_the_first_failure_once_every_other_path_is_flushed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [tmp_path / f"d{n}" for n in range(5)]
    for path in paths:
        path.mkdir()
    flushed: list[int] = []
    real = os.fsync

    def slow(fd: int) -> None:
        time.sleep(0.05)
        real(fd)
        flushed.append(os.fstat(fd).st_ino)

    monkeypatch.setattr(os, "fsync", slow)
    first, last = tmp_path / "gone-first", tmp_path / "gone-last"
    with pytest.raises(FileNotFoundError) as raised:
        localfiles.fsync_all([str(first), *(str(p) for p in paths), str(last)])
    assert raised.value.filename == str(first)
    assert sorted(flushed) == sorted(p.stat().st_ino for p in paths)
    flushed.clear()
    localfiles.fsync_all([str(p) for p in paths])  # no failure: nothing raised
    assert sorted(flushed) == sorted(p.stat().st_ino for p in paths)


def test_fsync_all_flushes_a_lone_path_in_the_calling_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new key's put flushes one directory: no hand-off to a flushing thread and back."""
    directory = tmp_path / "d"
    directory.mkdir()
    flushed: list[tuple[int, str]] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        real(fd)
        flushed.append((os.fstat(fd).st_ino, threading.current_thread().name))

    monkeypatch.setattr(os, "fsync", fsync)
    localfiles.fsync_all([str(directory)])
    assert flushed == [(directory.stat().st_ino, threading.current_thread().name)]
    with pytest.raises(FileNotFoundError) as raised:
        localfiles.fsync_all([str(tmp_path / "gone")])
    assert raised.value.filename == str(tmp_path / "gone")


@pytest.mark.skipif(localfiles.UNNAMED_FLAGS is None, reason="no O_TMPFILE here")
def test_link_unnamed_names_the_open_file_through_proc_following_the_link(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert localfiles.UNNAMED_FLAGS == os.O_TMPFILE | os.O_WRONLY
    calls: list[tuple[Any, Any, dict[str, Any]]] = []
    real = os.link

    def link(src: Any, dst: Any, **kwargs: Any) -> None:
        calls.append((src, dst, kwargs))
        real(src, dst, **kwargs)

    monkeypatch.setattr(os, "link", link)
    fd = os.open(tmp_path, localfiles.UNNAMED_FLAGS, 0o600)
    try:
        localfiles.write_into(fd, b"named at last")
        target = str(tmp_path / "object")
        localfiles.link_unnamed(fd, target)
        assert os.stat(target).st_ino == os.fstat(fd).st_ino
        with pytest.raises(FileExistsError):  # create-only: a name is never replaced
            localfiles.link_unnamed(fd, target)
    finally:
        os.close(fd)
    assert Path(target).read_bytes() == b"named at last"
    assert calls == [(f"/proc/self/fd/{fd}", target,
                      {"src_dir_fd": fd, "follow_symlinks": True})] * 2
