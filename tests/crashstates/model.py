"""Crash states a recorded operation log allows, under POSIX's persistence rules.

The model (ALICE's, Pillai et al., OSDI 2014, restricted to what POSIX promises):

- a file's data written before a completed ``fsync`` of that file, or before a ``syncfs``,
  persists; data written later may be lost, and of one ``write`` a prefix may persist;
- a name made or removed in a directory (create, link, unlink, rename, mkdir, rmdir)
  persists once that directory was fsynced afterwards, or after a ``syncfs``; later ones
  may be lost, in any combination;
- nothing else persists for free: a new directory's own entry in its parent is a name like
  any other, so a file linked into a new directory is lost with the directory unless the
  parent was fsynced too; an operation whose directory did not persist has no effect.

A crash point is any position in the log. At each one the operations before it that no
later flush covered are the *optional* ones; the states are the forced ones plus a choice
of optional ones, applied in log order. The bound (``MAX_SUBSETS``): every subset while
there are at most ``FULL_BELOW`` optional operations; beyond that, ALICE's own exploration —
every prefix of the optional ones in log order, each one left out alone, and each write kept
as a half. The database state at a crash point is the last commit recorded before it
(commits are durable once done: the embedded SQLite runs with ``synchronous=FULL``).
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass

from .recorder import Log, Op

FULL_BELOW = 6
_ENTRY = {"creat", "link", "unlink", "rename", "mkdir", "rmdir"}


@dataclass(frozen=True)
class CrashState:
    point: int  # operations of the log issued before the crash
    snap: int  # the database copy
    files: tuple[tuple[str, bytes], ...]
    dirs: tuple[str, ...]
    how: str  # which optional operations persisted (for a report)

    def fingerprint(self) -> str:
        h = hashlib.sha256(str(self.snap).encode())
        for path, data in self.files:
            h.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
        for d in self.dirs:
            h.update(b"d" + d.encode())
        return h.hexdigest()


def _dirs_of(op: Op) -> tuple[str, ...]:
    if op.kind == "rename":
        return os.path.dirname(op.path), os.path.dirname(op.dst)
    return (os.path.dirname(op.path),)


def optional_ops(ops: list[Op], point: int) -> tuple[list[int], list[int]]:
    """(forced, optional) indices of the file-system changes among ``ops[:point]``."""
    forced: list[int] = []
    optional: list[int] = []
    synced_all = -1
    last_file: dict[int, int] = {}
    last_dir: dict[str, int] = {}
    for i, op in enumerate(ops[:point]):
        if op.kind == "syncfs":
            synced_all = i
        elif op.kind == "fsync":
            last_file[op.inode] = i
        elif op.kind == "fsyncdir":
            last_dir[op.path] = i
    for i, op in enumerate(ops[:point]):
        if op.kind == "write":
            (forced if max(synced_all, last_file.get(op.inode, -1)) > i else optional).append(i)
        elif op.kind in _ENTRY:
            covered = all(max(synced_all, last_dir.get(d, -1)) > i for d in _dirs_of(op))
            (forced if covered else optional).append(i)
    return forced, optional


def choices(optional: list[int]) -> Iterator[tuple[frozenset[int], int | None]]:
    """(kept optional operations, a write kept as half or None) within the bound."""
    if len(optional) <= FULL_BELOW:
        for n in range(len(optional) + 1):
            for kept in itertools.combinations(optional, n):
                yield frozenset(kept), None
        return
    for n in range(len(optional) + 1):
        yield frozenset(optional[:n]), None
    everything = frozenset(optional)
    for i in optional:
        yield everything - {i}, None
        yield everything, i


class Tree:
    """The durable tree a choice of operations leaves."""

    def __init__(self, log: Log) -> None:
        self.root = log.root  # given: the operator's directory (its entry is not ours to sync)
        self.dirs = set(log.initial_dirs) | {log.root}
        self.names: dict[str, int] = {}
        self.data: dict[int, bytearray] = {}
        for n, (path, content) in enumerate(sorted(log.initial_files.items()), start=1):
            # The recorder numbered the initial files in scan order: inodes 1..n.
            self.names[path] = n
            self.data[n] = bytearray(content)

    def apply(self, op: Op, half: bool = False) -> None:
        parent = os.path.dirname(op.path)
        if op.kind == "write":
            assert op.data is not None
            chunk = op.data[: len(op.data) // 2] if half else op.data
            buf = self.data.setdefault(op.inode, bytearray())
            if len(buf) < op.offset:
                buf.extend(b"\0" * (op.offset - len(buf)))
            buf[op.offset: op.offset + len(chunk)] = chunk
        elif op.kind in ("creat", "link"):
            if parent in self.dirs and op.path not in self.names and op.path not in self.dirs:
                self.names[op.path] = op.inode
                self.data.setdefault(op.inode, bytearray())
        elif op.kind == "unlink":
            self.names.pop(op.path, None)
        elif op.kind == "rename":
            if op.path in self.names and os.path.dirname(op.dst) in self.dirs:
                self.names[op.dst] = self.names.pop(op.path)
        elif op.kind == "mkdir":
            if parent in self.dirs:
                self.dirs.add(op.path)
        elif op.kind == "rmdir":
            # The directory was empty when removed: if its removal persisted, so did its
            # emptiness (names in it whose unlinks were not kept are unreachable anyway).
            below = op.path + "/"
            self.dirs = {d for d in self.dirs if d != op.path and not d.startswith(below)}
            self.names = {p: i for p, i in self.names.items() if not p.startswith(below)}

    def visible(self) -> tuple[tuple[tuple[str, bytes], ...], tuple[str, ...]]:
        """Files and directories reachable from the root (a directory whose entry was lost
        takes what it held with it)."""
        def reachable(path: str) -> bool:
            while path != self.root:
                parent = os.path.dirname(path)
                if parent not in self.dirs:
                    return False
                path = parent
            return True
        files = tuple(sorted((p, bytes(self.data[i])) for p, i in self.names.items()
                             if reachable(p)))
        dirs = tuple(sorted(d for d in self.dirs if reachable(d)))
        return files, dirs


def crash_states(log: Log) -> Iterator[CrashState]:
    """Every crash state of ``log`` within the bound, each distinct one once."""
    seen: set[str] = set()
    snap = 0
    for point in range(len(log.ops) + 1):
        if point and log.ops[point - 1].kind == "db":
            snap = log.ops[point - 1].snap
        if point and log.ops[point - 1].kind in ("sent", "fsync", "fsyncdir", "syncfs"):
            continue  # the same states as the point before (a sent mark changes nothing)
        forced, optional = optional_ops(log.ops, point)
        for kept, half in choices(optional):
            tree = Tree(log)
            for i in sorted({*forced, *kept}):
                tree.apply(log.ops[i], half=(i == half))
            files, dirs = tree.visible()
            how = f"kept {sorted(kept)} of optional {optional}" + (
                f", op {half} half" if half is not None else "")
            state = CrashState(point, snap, files, dirs, how)
            key = state.fingerprint() + str(_acks_before(log, point))
            if key not in seen:
                seen.add(key)
                yield state


def _acks_before(log: Log, point: int) -> int:
    return sum(1 for op in log.ops[:point] if op.kind == "ack")
