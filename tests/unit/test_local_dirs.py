"""A local bucket's directories (storage_adapters/localdirs): made again when a concurrent
prune removes them under a put (64 attempts, then the put fails), and removed once a delete
empties them — deepest first, up to and never including the root, stopping quietly at a
directory that is not empty, already gone, a file, or outside the bucket."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from storage_adapters import local as local_module
from storage_adapters import localdirs
from storage_adapters.base import StorageUnavailable
from storage_adapters.local import LocalAdapter


def _makedirs_failing(monkeypatch: pytest.MonkeyPatch, error: type[OSError],
                      times: int) -> list[str]:
    """``os.makedirs`` raising ``error`` (what a prune racing it causes) its first ``times``
    calls; returns the calls."""
    real = os.makedirs
    calls: list[str] = []

    def makedirs(name: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(str(name))
        if len(calls) <= times:
            raise error(errno.ENOENT if error is FileNotFoundError else errno.EEXIST,
                        "raced", str(name))
        real(name, *args, **kwargs)

    monkeypatch.setattr(os, "makedirs", makedirs)
    return calls


@pytest.mark.parametrize("error", [FileNotFoundError, FileExistsError])
def test_ensure_dir_tries_again_when_a_prune_removes_a_directory_meanwhile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: type[OSError]) -> None:
    """A parent removed between two of makedirs' mkdirs (FileNotFoundError), or the
    directory removed between its mkdir and its check (FileExistsError): made again."""
    target = str(tmp_path / "a/b/c")
    calls = _makedirs_failing(monkeypatch, error, 1)
    localdirs.ensure_dir(target)
    assert os.path.isdir(target)
    assert [c for c in calls if c == target] == [target, target]  # (makedirs recurses)


def test_ensure_dir_gives_up_after_sixty_four_attempts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = str(tmp_path / "a/b")
    calls = _makedirs_failing(monkeypatch, FileNotFoundError, 10**6)
    with pytest.raises(FileNotFoundError):
        localdirs.ensure_dir(target)
    assert len(calls) == 64 == localdirs.ATTEMPTS


def test_ensure_dir_refuses_a_file_in_the_way_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "taken").write_bytes(b"a file, not a directory")
    calls = _makedirs_failing(monkeypatch, FileNotFoundError, 0)
    with pytest.raises(FileExistsError):
        localdirs.ensure_dir(str(tmp_path / "taken"))
    assert calls == [str(tmp_path / "taken")]
    localdirs.ensure_dir(str(tmp_path / "made/here"))  # and makes what is missing
    assert (tmp_path / "made/here").is_dir()
    calls.clear()
    localdirs.ensure_dir(str(tmp_path / "made/here"))  # one that exists: one call, no error
    assert calls == [str(tmp_path / "made/here")]


@pytest.mark.parametrize("prunes", [63, 64])
def test_a_put_outlasts_sixty_three_prunes_of_its_directory_and_not_sixty_four(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prunes: int) -> None:
    """The directory removed before each of the put's first ``prunes`` links (as deletes
    racing it would): made again each time, up to 64 links in all."""
    adapter = LocalAdapter(tmp_path / "b", fsync=False)
    adapter.put("warm/0", b"finds O_TMPFILE")
    target = adapter.root / "t/k/v1"
    pruned: list[str] = []
    real = local_module.link_unnamed if adapter._unnamed else os.link

    def link_after_a_prune(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if str(dst) == str(target) and len(pruned) < prunes:
            os.rmdir(os.path.dirname(dst))
            pruned.append(str(dst))
        real(src, dst, *args, **kwargs)

    monkeypatch.setattr(local_module if adapter._unnamed else os,
                        "link_unnamed" if adapter._unnamed else "link", link_after_a_prune)
    if prunes == 63:
        adapter.put("t/k/v1", b"landed")
        assert adapter.get("t/k/v1") == b"landed"
    else:
        with pytest.raises(StorageUnavailable):
            adapter.put("t/k/v1", b"never lands")
        assert not target.exists()
    assert len(pruned) == prunes


def _tree(root: Path, *dirs: str, files: tuple[str, ...] = ()) -> None:
    for d in dirs:
        (root / d).mkdir(parents=True, exist_ok=True)
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_bytes(b"x")


def _left(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_prune_removes_empty_directories_deepest_first_up_to_the_root(tmp_path: Path) -> None:
    root = tmp_path / "r"
    _tree(root, "x", "a/b")
    removed = localdirs.prune([str(root / "x"), str(root / "a/b"), str(root / "a/b")],
                              str(root))
    assert removed == [str(root / "a/b"), str(root / "a"), str(root / "x")]
    assert root.is_dir() and _left(root) == []
    # The root given with a slash, or as one of the directories: never removed.
    _tree(root, "y")
    assert localdirs.prune([str(root) + "/y/", str(root)], str(root) + "/") == [str(root / "y")]
    assert root.is_dir()


def test_prune_stops_at_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    root = tmp_path / "r"
    _tree(root, "a/b/c", files=("a/keep",))
    assert localdirs.prune([str(root / "a/b/c")], str(root)) == [
        str(root / "a/b/c"), str(root / "a/b")]
    assert _left(root) == ["a", "a/keep"]


def test_prune_goes_on_above_a_directory_another_delete_removed(tmp_path: Path) -> None:
    root = tmp_path / "r"
    _tree(root, "a")
    assert localdirs.prune([str(root / "a/gone")], str(root)) == [str(root / "a")]
    assert _left(root) == []


def test_prune_leaves_a_file_and_whatever_lies_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "r"
    _tree(root, "untouched", files=("a/file",))
    (tmp_path / "r2").mkdir()
    assert localdirs.prune([str(root / "a/file"), str(tmp_path / "r2")], str(root)) == []
    assert _left(root) == ["a", "a/file", "untouched"]
    assert (tmp_path / "r2").is_dir()


def test_prune_raises_an_error_it_does_not_expect(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "r"
    _tree(root, "a")

    def failing(path: Any, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EIO, "Input/output error", str(path))

    monkeypatch.setattr(os, "rmdir", failing)
    with pytest.raises(OSError, match="Input/output error"):
        localdirs.prune([str(root / "a")], str(root))


def test_prune_bucket_prunes_the_objects_tree_and_its_records_mirror(tmp_path: Path) -> None:
    root, records = tmp_path / "r", tmp_path / "r/.memplane-class"
    _tree(root, "t/k", "t/j/i", ".memplane-class/t/k", ".memplane-class/t/j/i",
          files=("t/j/keep",))
    removed = localdirs.prune_bucket({str(root / "t/k"), str(root / "t/j/i"), "/elsewhere"},
                                     str(root), str(records))
    assert sorted(removed) == [str(root / "t/j/i"), str(root / "t/k")]
    assert _left(root) == [".memplane-class", "t", "t/j", "t/j/keep"]


def test_prune_bucket_of_nothing_touches_nothing(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(os, "rmdir", calls.append)
    assert localdirs.prune_bucket(set(), str(tmp_path), str(tmp_path / ".memplane-class")) == []
    assert calls == []


def test_prune_bucket_after_a_failure_in_the_objects_tree_still_prunes_the_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The deletes succeeded either way: a directory that cannot be removed is left."""
    root, records = tmp_path / "r", tmp_path / "r/.memplane-class"
    _tree(root, "t/k", ".memplane-class/t/k")
    real = os.rmdir

    def objects_tree_fails(path: Any, *args: Any, **kwargs: Any) -> None:
        if not str(path).startswith(str(records)):
            raise OSError(errno.EIO, "Input/output error", str(path))
        real(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", objects_tree_fails)
    assert localdirs.prune_bucket({str(root / "t/k")}, str(root), str(records)) == []
    assert _left(root) == [".memplane-class", "t", "t/k"]
