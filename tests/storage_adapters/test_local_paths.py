"""The local adapter's own paths that the shared contract does not reach: the temporaries a
killed put leaves, a file system where ``O_TMPFILE`` opens but does not link, a directory a
concurrent delete removes under a put, the fsyncs of every directory a deep put makes, and a
delete on a bucket configured without fsync."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from storage_adapters import local as local_module
from storage_adapters import localdirs, localfiles
from storage_adapters.base import InvalidPath, ObjectNotFound, StorageUnavailable
from storage_adapters.bounded import ObjectTooLarge
from storage_adapters.local import LocalAdapter


class Fsyncs:
    """The inodes ``os.fsync`` is called on, from any thread (the adapter fsyncs several
    directories side by side on a pool); a test asks only about its own bucket's inodes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.inodes: list[int] = []
        real_fsync = os.fsync

        def fsync(fd: int) -> None:
            self.inodes.append(os.fstat(fd).st_ino)
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)

    def of(self, *paths: Path) -> list[int]:
        wanted = {p.stat().st_ino for p in paths}
        return [inode for inode in self.inodes if inode in wanted]


def test_stale_temporaries_are_removed_and_counted_and_fresh_ones_kept(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    tmp = adapter.root / ".memplane-tmp"
    for name in ("killed-1", "killed-2", "in-flight"):
        (tmp / name).write_bytes(b"partial object")
    for name in ("killed-1", "killed-2"):
        os.utime(tmp / name, (1_000_000, 1_000_000))

    assert adapter.remove_stale_temporaries(time.time() - 60) == 2
    assert sorted(p.name for p in tmp.iterdir()) == ["in-flight"]
    assert adapter.remove_stale_temporaries(time.time() - 60) == 0
    # "older than": a file last modified at the very instant given is kept.
    os.utime(tmp / "in-flight", (2_000_000, 2_000_000))
    assert adapter.remove_stale_temporaries(2_000_000) == 0
    assert adapter.remove_stale_temporaries(2_000_001) == 1
    shutil.rmtree(tmp)
    assert adapter.remove_stale_temporaries(time.time() + 60) == 0


@pytest.mark.parametrize("refused", ["open", "link"])
def test_where_an_unnamed_file_cannot_be_opened_or_linked_puts_use_a_named_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refused: str) -> None:
    """O_TMPFILE may be refused by the file system, or open and then fail to link through
    ``/proc`` (no /proc, a kernel that refuses it): the probe says no, and puts still land."""
    if localfiles.UNNAMED_FLAGS is None:
        pytest.skip("no O_TMPFILE on this platform: puts always use a named temporary")
    real_open = os.open

    def open_refusing_unnamed(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags == localfiles.UNNAMED_FLAGS:
            raise OSError(95, "Operation not supported")
        return real_open(path, flags, *args, **kwargs)

    def refuse_link(fd: int, target: str) -> None:
        raise OSError(18, "Invalid cross-device link")

    if refused == "open":
        monkeypatch.setattr(os, "open", open_refusing_unnamed)
    else:
        monkeypatch.setattr(local_module, "link_unnamed", refuse_link)
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    adapter.put("memories/user/u1/k/v1.json", b"stored")

    assert adapter._unnamed is False
    assert adapter.get("memories/user/u1/k/v1.json") == b"stored"
    assert list((adapter.root / ".memplane-tmp").iterdir()) == []


def _prune_before_links(adapter: LocalAdapter, monkeypatch: pytest.MonkeyPatch, target: Path,
                        times: int) -> list[str]:
    """Remove the target's directory (as a concurrent delete's prune does) just before each
    of the put's first ``times`` links; returns what was pruned."""
    pruned: list[str] = []
    real = local_module.link_unnamed if adapter._unnamed else os.link

    def link_after_a_prune(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if str(dst) == str(target) and len(pruned) < times:
            os.rmdir(os.path.dirname(dst))
            pruned.append(str(dst))
        real(src, dst, *args, **kwargs)

    if adapter._unnamed:
        monkeypatch.setattr(local_module, "link_unnamed", link_after_a_prune)
    else:
        monkeypatch.setattr(os, "link", link_after_a_prune)
    return pruned


@pytest.mark.parametrize("prunes", [2, 3])
def test_a_put_makes_its_directory_again_up_to_its_last_attempt_then_gives_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prunes: int) -> None:
    """A concurrent delete may prune the directory between the put's mkdir and its link;
    the put makes it again, up to ``localdirs.ATTEMPTS`` links in all (3 here)."""
    monkeypatch.setattr(localdirs, "ATTEMPTS", 3)
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    adapter.put("warm/0", b"finds O_TMPFILE")
    target = adapter.root / "memories/user/u1/k/v1.json"
    pruned = _prune_before_links(adapter, monkeypatch, target, prunes)

    if prunes < 3:
        adapter.put("memories/user/u1/k/v1.json", b"landed")
        assert adapter.get("memories/user/u1/k/v1.json") == b"landed"
    else:
        with pytest.raises(StorageUnavailable):
            adapter.put("memories/user/u1/k/v1.json", b"never lands")
        assert not target.exists()
    assert len(pruned) == prunes


def test_a_put_whose_new_directory_is_pruned_before_its_flush_makes_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The directories a put made are gone (a delete pruned them) when it fsyncs their
    parents: the put goes on, and its link makes them again."""
    adapter = LocalAdapter(tmp_path / "b")
    adapter.put("warm", b"makes the temporary directory")
    real = local_module.fsync_all
    calls: list[list[str]] = []

    def pruned_first(paths: list[str]) -> None:
        calls.append(paths)
        if len(calls) == 1:
            os.rmdir(adapter.root / "t/k")
            os.rmdir(adapter.root / "t")
            raise FileNotFoundError(2, "No such file or directory")
        real(paths)

    monkeypatch.setattr(local_module, "fsync_all", pruned_first)
    adapter.put("t/k/v1", b"landed")

    assert adapter.get("t/k/v1") == b"landed"
    assert len(calls) == 2


def test_a_put_fsyncs_the_parent_of_every_directory_it_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = LocalAdapter(tmp_path / "b")
    adapter.put("warm", b"makes the temporary directory and finds O_TMPFILE")
    fsyncs = Fsyncs(monkeypatch)
    adapter.put("t/memories/user/u1/v1.json", b"deep")

    root = adapter.root
    made = [root, root / "t", root / "t/memories", root / "t/memories/user",
            root / "t/memories/user/u1"]
    assert sorted(fsyncs.of(*made)) == sorted(p.stat().st_ino for p in made)

    # Into a tree that partly exists: only the parents of the directories it made, and the
    # object's own directory — none of the existing ones above them.
    fsyncs.inodes.clear()
    adapter.put("t/memories/team/T1/v1.json", b"beside")
    made = [root / "t/memories", root / "t/memories/team", root / "t/memories/team/T1"]
    assert sorted(fsyncs.of(root, root / "t", *made)) == sorted(p.stat().st_ino for p in made)
    assert adapter.get("t/memories/user/u1/v1.json") == b"deep"


@pytest.mark.parametrize("fsync", [True, False])
def test_a_delete_fsyncs_its_directories_only_on_a_bucket_that_fsyncs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: bool) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=fsync)
    adapter.put("t/k/v1", b"1")
    adapter.put("t/k/v2", b"2")
    directory = adapter.root / "t/k"
    fsyncs = Fsyncs(monkeypatch)
    assert adapter.delete_many(["t/k/v1"]) == 1

    expected = [directory.stat().st_ino] if fsync else []
    assert fsyncs.of(directory, adapter.root, adapter.root / "t") == expected
    assert [p.name for p in (adapter.root / "t/k").iterdir()] == ["v2"]


def test_a_put_into_a_file_system_that_refuses_it_is_storage_unavailable(
        tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    (adapter.root / "t").write_bytes(b"a file where a directory should be")
    with pytest.raises(StorageUnavailable):
        adapter.put("t/k/v1", b"1")


def test_a_segment_of_255_bytes_is_a_name_and_one_of_256_is_refused(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    adapter.put("t/" + "é" * 127 + "x", b"255 bytes")
    assert adapter.get("t/" + "é" * 127 + "x") == b"255 bytes"
    with pytest.raises(InvalidPath, match="longer than 255 bytes"):
        adapter.put("t/" + "é" * 128, b"256 bytes")


def test_a_class_record_naming_a_class_the_bucket_does_not_know_reads_as_standard(
        tmp_path: Path) -> None:
    """A record the adapter did not write (copied from elsewhere, edited by hand) never
    reaches the caller as a class name."""
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    adapter.put("t/k/v1", b"1")
    adapter.set_storage_class("t/k/v1", "archive")
    assert adapter.head("t/k/v1").storage_class == "archive"
    (adapter.root / ".memplane-class/t/k/v1").write_text("GLACIER\n")
    assert adapter.head("t/k/v1").storage_class == "standard"


def test_a_listing_by_prefix_finds_a_match_after_names_that_do_not_match(
        tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    for path in ("p/a-1", "p/b-1", "p/b-2", "p/c-1", "q/b-1"):
        adapter.put(path, b"x")
    assert [info.path for info in adapter.list("p/b")] == ["p/b-1", "p/b-2"]


def test_a_path_the_file_system_cannot_open_is_storage_unavailable(tmp_path: Path) -> None:
    """Not every failure to open is "no such object": a symlink loop (ELOOP) is the disk's
    fault, answered as the bucket being unavailable, never as a missing object."""
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    adapter.put("t/k/v1", b"1")
    loop = adapter.root / "t/k/loop"
    loop.symlink_to(loop)
    with pytest.raises(StorageUnavailable, match="local read failed"):
        adapter.get("t/k/loop")
    with pytest.raises(StorageUnavailable, match="local read failed"):
        list(adapter.iter_chunks("t/k/loop"))


def test_a_read_bounded_at_the_objects_exact_size_returns_all_of_it(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    adapter.put("t/one", b"x")
    adapter.put("t/two", b"xy")
    assert adapter.get("t/one", max_bytes=1) == b"x"
    assert adapter.get("t/two", max_bytes=2) == b"xy"
    with pytest.raises(ObjectTooLarge):
        adapter.get("t/two", max_bytes=1)


def test_a_delete_the_file_system_refuses_is_storage_unavailable(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    adapter.put("t/k/v1", b"1")
    with pytest.raises(StorageUnavailable, match="local delete failed"):
        adapter.delete_many(["t/k"])  # a directory: unlink is refused (EISDIR)
    assert adapter.get("t/k/v1") == b"1"


def test_a_directory_pruned_by_another_delete_before_the_flush_is_no_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = LocalAdapter(tmp_path / "b")
    adapter.put("t/k/v1", b"1")
    adapter.put("t/k/v2", b"2")

    def pruned_meanwhile(paths: list[str]) -> None:
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(local_module, "fsync_all", pruned_meanwhile)
    assert adapter.delete_many(["t/k/v1"]) == 1
    assert [info.path for info in adapter.list("t/")] == ["t/k/v2"]


def test_a_listing_skips_a_file_deleted_while_it_walks_and_lists_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    for path in ("p/a", "p/b", "p/c"):
        adapter.put(path, b"x")
    gone = str(adapter.root / "p/a")
    real_stat = os.stat

    def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if str(path) == gone:
            raise FileNotFoundError(2, "No such file or directory", gone)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    assert [info.path for info in adapter.list("p/")] == ["p/b", "p/c"]


def test_a_batch_on_a_bucket_without_fsync_flushes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    adapter.put("warm", b"finds O_TMPFILE")
    flushes: list[int] = []
    if localfiles.syncfs is not None:
        real_syncfs = localfiles.syncfs

        def syncfs(fd: int) -> int:
            flushes.append(fd)
            return int(real_syncfs(fd))

        monkeypatch.setattr(localfiles, "syncfs", syncfs)
    fsyncs = Fsyncs(monkeypatch)
    assert adapter.put_many([("t/a", b"1"), ("t/b", b"2")]) == [None, None]

    assert (flushes, fsyncs.inodes) == ([], [])
    assert [adapter.get("t/a"), adapter.get("t/b")] == [b"1", b"2"]


def test_a_stale_temporary_removed_by_someone_else_meanwhile_does_not_stop_the_sweep(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sweeps (two replicas' orphan GC) may race: the file one of them is about to
    remove is gone; it goes on with the others."""
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    tmp = adapter.root / ".memplane-tmp"
    for n in range(4):
        (tmp / f"killed-{n}").write_bytes(b"partial")
        os.utime(tmp / f"killed-{n}", (1_000_000, 1_000_000))
    real_unlink = os.unlink
    raced: list[str] = []

    def unlink(path: Any, *args: Any, **kwargs: Any) -> None:
        if not raced:  # the other sweep removes the first file just before this one does
            raced.append(str(path))
            real_unlink(path)
            raise FileNotFoundError(2, "No such file or directory", str(path))
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    assert adapter.remove_stale_temporaries(time.time()) == 3
    assert list(tmp.iterdir()) == [] and len(raced) == 1


def test_a_delete_whose_flush_fails_is_storage_unavailable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Until its directory is flushed a deleted object may come back after a crash: a failed
    flush is reported, never taken for a durable delete."""
    adapter = LocalAdapter(tmp_path / "b")
    adapter.put("t/k/v1", b"1")
    adapter.put("t/k/v2", b"2")

    def failing_disk(paths: list[str]) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(local_module, "fsync_all", failing_disk)
    with pytest.raises(StorageUnavailable, match="local delete failed: Input/output error"):
        adapter.delete_many(["t/k/v1"])


def test_a_bucket_directory_opened_again_keeps_its_objects(tmp_path: Path) -> None:
    """A restart opens the same directory: its temporary directory is already there."""
    LocalAdapter(tmp_path / "b", fsync=False).put("t/k/v1", b"kept")
    again = LocalAdapter(tmp_path / "b", fsync=False)
    assert again.get("t/k/v1") == b"kept"


def test_a_key_under_an_object_or_naming_a_directory_is_not_found(tmp_path: Path) -> None:
    """``a/b`` when ``a`` is an object (the file system says NotADirectoryError) and ``d``
    when ``d/x`` is one (IsADirectoryError): no such object, not an unavailable bucket."""
    adapter = LocalAdapter(tmp_path)
    adapter.put("a", b"one")
    adapter.put("d/x", b"two")
    for key in ("a/b", "d"):
        with pytest.raises(ObjectNotFound):
            adapter.get(key)
        with pytest.raises(ObjectNotFound):
            b"".join(adapter.iter_chunks(key))
    with pytest.raises(ObjectNotFound):
        adapter.head("a/b")
    assert adapter.delete_many(["a/b"]) == 1  # every key asked counts
    assert (adapter.get("a"), adapter.get("d/x")) == (b"one", b"two")
