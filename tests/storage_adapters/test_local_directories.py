"""A local bucket removes the directories its deletes empty (their names are object paths,
which name people), and a put racing those removals never fails or loses its object."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pytest

from storage_adapters import localdirs
from storage_adapters.local import LocalAdapter

THREADS, ROUNDS = 8, 150


def _dirs(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir())


def test_deletes_remove_emptied_directories_up_to_the_root(tmp_path: Path) -> None:
    bucket = LocalAdapter(tmp_path / "b", fsync=False)
    bucket.put("t/memories/user/bob/diet/v1", b"1")
    bucket.put("t/memories/team/T9/bobnote/v1", b"2")
    bucket.put("t/memories/team/T9/roadmap/v1", b"3")
    bucket.set_storage_class("t/memories/user/bob/diet/v1", "archive")
    bucket.delete_many(["t/memories/user/bob/diet/v1", "t/memories/team/T9/bobnote/v1"])
    assert _dirs(tmp_path / "b") == [
        ".memplane-class", ".memplane-tmp", "t", "t/memories", "t/memories/team",
        "t/memories/team/T9", "t/memories/team/T9/roadmap"]
    bucket.delete_many(["t/memories/team/T9/roadmap/v1"])
    assert _dirs(tmp_path / "b") == [".memplane-class", ".memplane-tmp"]
    # A bucket emptied to its root takes puts as before.
    bucket.put("t/memories/user/bob/diet/v2", b"4")
    assert bucket.get("t/memories/user/bob/diet/v2") == b"4"


def test_puts_racing_deletes_in_one_directory_lose_nothing(tmp_path: Path) -> None:
    """Threads put and delete objects under shared directories, so they empty, remove and
    make them again all the time: every put succeeds and reads back, every object kept at
    the end is there, and nothing else is."""
    bucket = LocalAdapter(tmp_path / "b", fsync=False)
    failures: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def work(n: int) -> None:
        try:
            start.wait()
            for i in range(ROUNDS):
                path = f"t/memories/user/bob/k{i % 3}/t{n}-{i}"
                bucket.put(path, f"{n}-{i}".encode())
                assert bucket.get(path) == f"{n}-{i}".encode()
                if i != ROUNDS - 1:
                    bucket.delete_many([path])
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    kept = sorted(info.path for info in bucket.list("t/"))
    last = ROUNDS - 1
    assert kept == sorted(f"t/memories/user/bob/k{last % 3}/t{n}-{last}" for n in range(THREADS))
    for path in kept:
        assert bucket.get(path) == path.rsplit("/t", 1)[1].encode()
    assert not os.path.exists(tmp_path / "b" / "t/memories/user/bob/k0")


def test_puts_making_a_directory_a_prune_keeps_removing_never_fail(tmp_path: Path) -> None:
    """Eight puts make one directory while a delete keeps pruning it: each sees it made by
    another put, then gone, then made again; none takes that for a file in the way (two
    looks, exists then is-a-directory, once did, and a put failed)."""
    directory = str(tmp_path / "memories" / "k0")
    os.makedirs(os.path.dirname(directory))
    done = threading.Event()
    failures: list[BaseException] = []
    made = [0] * 8

    def make(n: int) -> None:
        try:
            for _ in range(5000):
                localdirs.ensure_dir(directory)
                made[n] += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    def prune() -> None:  # the directory only: its parent stays, as a scope's does
        while not done.is_set():
            with contextlib.suppress(OSError):
                os.rmdir(directory)

    pruner = threading.Thread(target=prune)
    makers = [threading.Thread(target=make, args=(n,)) for n in range(8)]
    pruner.start()
    for thread in makers:
        thread.start()
    for thread in makers:
        thread.join()
    done.set()
    pruner.join()
    assert failures == []
    assert made == [5000] * 8
    # A file where the directory should be is still refused at once.
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(directory)
    Path(directory).write_bytes(b"")
    with pytest.raises(FileExistsError):
        localdirs.ensure_dir(directory)
