"""A single put is durable when it returns, for every adapter that keeps its objects in
files (the local one): a spy at the operating system's boundary records the calls, and the
object's data file must be fsynced before it is linked into place, its directory after.

A killed process keeps the page cache, so no kill test can see a missing fsync; only the
order of the calls shows it. Removing either ``os.fsync`` from the put fails these tests.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from storage_adapters.local import LocalAdapter


class Spy:
    """``os.fsync`` and ``os.link`` made by this thread (a single put makes its calls in the
    caller's thread; other tests' servers may still be writing in theirs), recorded as (call,
    inode of what they touched), in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int]] = []
        real_fsync, real_link = os.fsync, os.link
        mine = threading.get_ident()

        def fsync(fd: int) -> None:
            if threading.get_ident() == mine:
                self.calls.append(("fsync", os.fstat(fd).st_ino))
            real_fsync(fd)

        def link(src: Any, dst: Any, **kwargs: Any) -> None:
            real_link(src, dst, **kwargs)
            if threading.get_ident() == mine:
                self.calls.append(("link", os.stat(dst).st_ino))

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "link", link)


def _assert_synced_around_the_link(spy: Spy, file: Path) -> None:
    """The object's data was fsynced before it got its name, its directory after (other
    fsyncs, of directories a put made, may come too)."""
    file_inode, directory_inode = file.stat().st_ino, file.parent.stat().st_ino
    links = [n for n, call in enumerate(spy.calls) if call == ("link", file_inode)]
    assert len(links) == 1, spy.calls
    assert ("fsync", file_inode) in spy.calls[:links[0]], spy.calls
    assert ("fsync", directory_inode) in spy.calls[links[0] + 1:], spy.calls


def _single_put(adapter: LocalAdapter, path: str, data: bytes) -> None:
    adapter.put(path, data)


def _streamed_put(adapter: LocalAdapter, path: str, data: bytes) -> None:
    adapter.put_file(path, io.BytesIO(data))


PUTS: dict[str, Callable[[LocalAdapter, str, bytes], None]] = {
    "put": _single_put, "put_file": _streamed_put}


@pytest.fixture(params=["unnamed", "named"])
def adapter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalAdapter]:
    """The local adapter, writing through an unnamed ``O_TMPFILE`` file where the file system
    allows it, and through a named temporary file where not (forced here)."""
    local = LocalAdapter(tmp_path / "bucket")
    if request.param == "named":
        local._unnamed = False
    yield local
    local.close()


@pytest.mark.parametrize("put", sorted(PUTS))
def test_a_put_fsyncs_the_file_before_linking_it_and_the_directory_after(
        adapter: LocalAdapter, monkeypatch: pytest.MonkeyPatch, put: str) -> None:
    adapter.put("warm/0", b"makes the temporary directory and finds O_TMPFILE")
    spy = Spy(monkeypatch)
    PUTS[put](adapter, "memories/user/u1/k/v1.json", b"acknowledged")
    _assert_synced_around_the_link(spy, adapter.root / "memories/user/u1/k/v1.json")
    assert adapter.get("memories/user/u1/k/v1.json") == b"acknowledged"


def test_a_put_into_an_existing_directory_still_fsyncs_both(
        adapter: LocalAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter.put("memories/user/u1/k/v1.json", b"first")
    spy = Spy(monkeypatch)
    adapter.put("memories/user/u1/k/v2.json", b"second")
    _assert_synced_around_the_link(spy, adapter.root / "memories/user/u1/k/v2.json")


def test_a_bucket_configured_without_fsync_makes_no_such_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The spy sees the calls the put makes, not some it would see anyway."""
    adapter = LocalAdapter.from_config({"root": str(tmp_path / "bucket"), "fsync": "false"})
    try:
        adapter.put("warm/0", b"finds O_TMPFILE")
        spy = Spy(monkeypatch)
        adapter.put("memories/user/u1/k/v1.json", b"not durable")
        assert [call for call, _ in spy.calls] == ["link"]
    finally:
        adapter.close()
