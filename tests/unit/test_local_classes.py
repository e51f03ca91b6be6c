"""The storage classes a local bucket records beside its objects (storage_adapters/localclasses):
a record on a bucket that fsyncs is flushed before it replaces the previous one, then its
directory and the parent of every directory made for it (a spy on the operating system's
calls shows each), and never on one that does not; a record that cannot be written, read or
removed is the bucket being unavailable, while a missing one is no record."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from storage_adapters.base import StorageUnavailable
from storage_adapters.local import LocalAdapter


class Calls:
    """``os.fsync`` (from any thread: directories are flushed side by side) and
    ``os.replace``, as (call, inode), in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, under: Path) -> None:
        self.calls: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        real_fsync, real_replace = os.fsync, os.replace

        def fsync(fd: int) -> None:
            # only the bucket's: other tests' threads in this process may flush their own files
            if os.readlink(f"/proc/self/fd/{fd}").startswith(str(under)):
                with self._lock:
                    self.calls.append(("fsync", os.fstat(fd).st_ino))
            real_fsync(fd)

        def replace(src: Any, dst: Any, **kwargs: Any) -> None:
            real_replace(src, dst, **kwargs)
            with self._lock:
                self.calls.append(("replace", os.stat(dst).st_ino))

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)


def _inodes(*paths: Path) -> list[tuple[str, int]]:
    return sorted(("fsync", p.stat().st_ino) for p in paths)


def test_a_durable_record_is_flushed_then_named_then_its_new_directories_flushed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = LocalAdapter(tmp_path / "b")
    for path in ("t/k/v1", "t/k/v2", "t/j/v3"):
        adapter.put(path, b"object")
    root, records = adapter.root, adapter.root / ".memplane-class"
    spy = Calls(monkeypatch, tmp_path)

    # The bucket's first record: its file, then its directory, and the entries of the three
    # directories made for it (.memplane-class/t/k, .memplane-class/t, .memplane-class).
    assert adapter.set_storage_class("t/k/v1", "archive") == "archive"
    record = records / "t/k/v1"
    assert spy.calls[:2] == [("fsync", record.stat().st_ino), ("replace", record.stat().st_ino)]
    assert sorted(spy.calls[2:]) == _inodes(records / "t/k", records / "t", records, root)

    # Beside it: nothing new to flush but its own directory.
    spy.calls.clear()
    adapter.set_storage_class("t/k/v2", "cold")
    record = records / "t/k/v2"
    assert spy.calls == [("fsync", record.stat().st_ino), ("replace", record.stat().st_ino),
                         ("fsync", (records / "t/k").stat().st_ino)]

    # In a new directory of an existing one.
    spy.calls.clear()
    adapter.set_storage_class("t/j/v3", "archive")
    record = records / "t/j/v3"
    assert spy.calls[:2] == [("fsync", record.stat().st_ino), ("replace", record.stat().st_ino)]
    assert sorted(spy.calls[2:]) == _inodes(records / "t/j", records / "t")

    # A record replaced: flushed before the replace, as a new one.
    spy.calls.clear()
    adapter.set_storage_class("t/k/v1", "cold")
    record = records / "t/k/v1"
    assert spy.calls == [("fsync", record.stat().st_ino), ("replace", record.stat().st_ino),
                         ("fsync", (records / "t/k").stat().st_ino)]
    assert [adapter.head(p).storage_class for p in ("t/k/v1", "t/k/v2", "t/j/v3")] == [
        "cold", "cold", "archive"]
    assert list((root / ".memplane-tmp").iterdir()) == []
    adapter.close()


def test_a_record_on_a_bucket_without_fsync_is_never_flushed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    adapter.put("t/k/v1", b"object")
    spy = Calls(monkeypatch, tmp_path)
    adapter.set_storage_class("t/k/v1", "archive")
    record = adapter.root / ".memplane-class/t/k/v1"
    assert spy.calls == [("replace", record.stat().st_ino)]
    assert record.read_text() == "archive"


def test_the_first_record_says_a_class_was_ever_recorded(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    adapter.put("t/k/v1", b"object")
    assert adapter._records.any_recorded() is False
    adapter.set_storage_class("t/k/v1", "archive")
    assert adapter._records.any_recorded() is True


def test_a_record_that_cannot_be_written_is_storage_unavailable_and_leaves_nothing(
        tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    adapter.put("t/k/v1", b"object")
    (adapter.root / ".memplane-class").mkdir()
    (adapter.root / ".memplane-class/t").write_bytes(b"a file where a directory should be")
    with pytest.raises(StorageUnavailable, match="^local write failed: Not a directory$"):
        adapter.set_storage_class("t/k/v1", "archive")
    assert list((adapter.root / ".memplane-tmp").iterdir()) == []


def test_a_record_that_cannot_be_flushed_is_storage_unavailable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = LocalAdapter(tmp_path / "b")
    adapter.put("t/k/v1", b"object")

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(StorageUnavailable, match="^local write failed: Input/output error$"):
        adapter.set_storage_class("t/k/v1", "archive")
    assert list((adapter.root / ".memplane-tmp").iterdir()) == []


def test_reading_a_record_under_a_file_or_at_a_directory_is_no_record(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    records = adapter._records
    (adapter.root / ".memplane-class/t/d").mkdir(parents=True)
    (adapter.root / ".memplane-class/t/f").write_text("archive\n")
    assert records.read("t/f") == "archive"
    assert records.read("t/f/under") is None       # NotADirectoryError
    assert records.read("t/d") is None             # IsADirectoryError
    assert records.read("t/missing") is None       # FileNotFoundError
    loop = adapter.root / ".memplane-class/t/loop"
    loop.symlink_to(loop)
    with pytest.raises(StorageUnavailable,
                       match="^local read failed: Too many levels of symbolic links$"):
        records.read("t/loop")


def test_forgetting_a_record_that_is_not_there_is_quiet_and_a_directory_is_refused(
        tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    records = adapter._records
    (adapter.root / ".memplane-class/t/d").mkdir(parents=True)
    (adapter.root / ".memplane-class/t/f").write_text("archive")
    records.forget("t/missing")                    # FileNotFoundError
    records.forget("t/f/under")                    # NotADirectoryError
    assert (adapter.root / ".memplane-class/t/f").exists()
    records.forget("t/f")
    assert not (adapter.root / ".memplane-class/t/f").exists()
    with pytest.raises(StorageUnavailable, match="^local delete failed: Is a directory$"):
        records.forget("t/d")
    assert (adapter.root / ".memplane-class/t/d").is_dir()
