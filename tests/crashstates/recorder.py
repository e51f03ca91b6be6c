"""An operation log recorded at a local bucket's OS boundary.

While a ``Recorder`` is installed, the ``os`` calls a local bucket's writes are made of
(``open``, ``write``, ``fsync``, ``link``, ``unlink``, ``rename``/``replace``, ``mkdir``,
``rmdir``, ``close``) and Linux's ``syncfs`` (``storage_adapters.localfiles.syncfs``) pass
through a layer that appends each successful call under the bucket root to a log, in the
order the calls completed (one lock serialises them). Between them the log holds the
database's commits (a copy of the SQLite file each time its ``data_version`` moved) and the
workload's own marks (a request sent, a request acknowledged). On PostgreSQL the commits
are copies of its tables (pgsnap.py).

Why here and not strace: the log names inodes, not descriptors (an ``O_TMPFILE`` file linked
through ``/proc/self/fd`` is one inode from its open to its name), needs no package and no
ptrace permission in CI, and places the database commits exactly between the file-system
calls of the same process. What it cannot see (C code writing files itself, the builtin
``open`` used by storage-class records) is outside the bucket paths exercised here.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from storage_adapters import localfiles

_TMPFILE = getattr(os, "O_TMPFILE", 0)
_PATCHED = ("open", "write", "fsync", "link", "unlink", "rename", "replace", "mkdir",
            "rmdir", "close")


@dataclass
class Op:
    """One entry of the log. ``kind``: creat, write, fsync, fsyncdir, link, unlink, rename,
    mkdir, rmdir, syncfs (the file system); db (a commit: ``snap`` names the copy); sent, ack
    (the workload: ``path`` is the key, ``data`` the value, None for a delete)."""

    kind: str
    path: str = ""
    dst: str = ""
    inode: int = -1
    offset: int = 0
    data: bytes | None = None
    snap: int = -1


@dataclass
class Log:
    root: str
    initial_files: dict[str, bytes]
    initial_dirs: set[str]
    snapshots: list[Any]  # a SQLite file's copy (Path) or a pgsnap.Snapshot
    ops: list[Op] = field(default_factory=list)


class Commits(Protocol):
    def poll(self) -> Any:
        """A copy of the database if a commit completed since the last poll, else None."""

    def close(self) -> None: ...


class SqliteCommits:
    """A copy of the SQLite file each time its ``PRAGMA data_version`` moved."""

    def __init__(self, database: Path, snapshots: Path) -> None:
        self.snap_dir = snapshots
        snapshots.mkdir(parents=True, exist_ok=True)
        self._monitor = sqlite3.connect(str(database), check_same_thread=False)
        self._version: int | None = None
        self.count = 0

    def poll(self) -> Path | None:
        version = self._monitor.execute("PRAGMA data_version").fetchone()[0]
        if version == self._version:
            return None
        self._version = version
        target = self.snap_dir / f"db-{self.count}.sqlite"
        self.count += 1
        copy = sqlite3.connect(str(target))
        with copy:
            self._monitor.backup(copy)
        copy.close()
        return target

    def close(self) -> None:
        self._monitor.close()


class Recorder:
    def __init__(self, root: Path, commits: Commits) -> None:
        self.root = os.path.realpath(root)
        self.commits = commits
        self.lock = threading.RLock()
        self.fds: dict[int, tuple[str, Any]] = {}  # fd -> ("inode", id, offset) | ("dir", path)
        self.offsets: dict[int, int] = {}
        self.names: dict[str, int] = {}  # the running (volatile) tree: path -> inode
        self.next_inode = 0
        self.real: dict[str, Any] = {}
        files, dirs = self._scan()
        self.names = {p: self._inode() for p in sorted(files)}
        self.log = Log(self.root, files, dirs, [])
        self._db_check()

    # -- the database side ------------------------------------------------------------------
    def _db_check(self) -> None:
        snapshot = self.commits.poll()
        if snapshot is None:
            return
        self.log.snapshots.append(snapshot)
        self.log.ops.append(Op("db", snap=len(self.log.snapshots) - 1))

    def mark(self, kind: str, key: str, value: str | None) -> None:
        with self.lock:
            self._db_check()
            self.log.ops.append(Op(kind, path=key, data=None if value is None
                                   else value.encode()))

    # -- the file-system side ---------------------------------------------------------------
    def _scan(self) -> tuple[dict[str, bytes], set[str]]:
        files: dict[str, bytes] = {}
        dirs: set[str] = {self.root}
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirs.update(os.path.join(dirpath, d) for d in dirnames)
            for name in filenames:
                full = os.path.join(dirpath, name)
                files[full] = Path(full).read_bytes()
        return files, dirs

    def _inode(self) -> int:
        self.next_inode += 1
        return self.next_inode

    def _mine(self, path: Any) -> str | None:
        if isinstance(path, int):
            return None
        text = os.fsdecode(os.fspath(path))
        text = os.path.normpath(text if os.path.isabs(text) else os.path.join(os.getcwd(), text))
        return text if text == self.root or text.startswith(self.root + "/") else None

    def _add(self, op: Op) -> None:
        self._db_check()
        self.log.ops.append(op)

    def install(self) -> None:
        for name in _PATCHED:
            self.real[name] = getattr(os, name)
            setattr(os, name, getattr(self, f"_{name}"))
        self.real["syncfs"] = localfiles.syncfs
        if localfiles.syncfs is not None:
            localfiles.syncfs = self._syncfs

    def uninstall(self) -> None:
        with self.lock:
            for name in _PATCHED:
                setattr(os, name, self.real[name])
            localfiles.syncfs = self.real["syncfs"]
            self._db_check()
            self.commits.close()

    def _open(self, path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:
        mine = self._mine(path)
        if mine is None:
            return self.real["open"](path, flags, mode, dir_fd=dir_fd)
        with self.lock:
            existed = os.path.lexists(mine)
            fd = self.real["open"](path, flags, mode, dir_fd=dir_fd)
            if _TMPFILE and flags & _TMPFILE == _TMPFILE:
                self.fds[fd] = ("inode", self._inode())
            elif os.path.isdir(mine):
                self.fds[fd] = ("dir", mine)
            elif not existed:
                inode = self._inode()
                self.names[mine] = inode
                self.fds[fd] = ("inode", inode)
                self._add(Op("creat", path=mine, inode=inode))
            elif mine in self.names:
                self.fds[fd] = ("inode", self.names[mine])
            self.offsets[fd] = 0
            return fd

    def _write(self, fd: int, data: Any) -> int:
        if fd not in self.fds:
            return self.real["write"](fd, data)
        with self.lock:
            n = self.real["write"](fd, data)
            kind, inode = self.fds[fd]
            if kind == "inode":
                self._add(Op("write", inode=inode, offset=self.offsets[fd],
                             data=bytes(data[:n])))
                self.offsets[fd] += n
            return n

    def _fsync(self, fd: Any) -> None:
        if fd not in self.fds:
            return self.real["fsync"](fd)
        with self.lock:
            self.real["fsync"](fd)
            kind, what = self.fds[fd]
            self._add(Op("fsync", inode=what) if kind == "inode" else Op("fsyncdir", path=what))

    def _close(self, fd: int) -> None:
        with self.lock:
            self.fds.pop(fd, None)
            self.offsets.pop(fd, None)
        self.real["close"](fd)

    def _syncfs(self, fd: int) -> int:
        with self.lock:
            result: int = self.real["syncfs"](fd)
            if result == 0:
                self._add(Op("syncfs"))
            return result

    def _link(self, src: Any, dst: Any, **kwargs: Any) -> None:
        mine = self._mine(dst)
        if mine is None:
            return self.real["link"](src, dst, **kwargs)
        with self.lock:
            self.real["link"](src, dst, **kwargs)
            text = os.fspath(src)
            if isinstance(text, str) and text.startswith("/proc/self/fd/"):
                inode = self.fds[int(text.rsplit("/", 1)[1])][1]
            else:
                inode = self.names[self._mine(src) or ""]
            self.names[mine] = inode
            self._add(Op("link", path=mine, inode=inode))

    def _unlink(self, path: Any, *, dir_fd: Any = None) -> None:
        mine = self._mine(path)
        if mine is None:
            return self.real["unlink"](path, dir_fd=dir_fd)
        with self.lock:
            self.real["unlink"](path, dir_fd=dir_fd)
            self.names.pop(mine, None)
            self._add(Op("unlink", path=mine))

    def _rename(self, src: Any, dst: Any, **kwargs: Any) -> None:
        self._move("rename", src, dst, **kwargs)

    def _replace(self, src: Any, dst: Any, **kwargs: Any) -> None:
        self._move("replace", src, dst, **kwargs)

    def _move(self, how: str, src: Any, dst: Any, **kwargs: Any) -> None:
        mine, theirs = self._mine(dst), self._mine(src)
        if mine is None or theirs is None:
            return self.real[how](src, dst, **kwargs)
        with self.lock:
            self.real[how](src, dst, **kwargs)
            if theirs in self.names:
                self.names[mine] = self.names.pop(theirs)
            self._add(Op("rename", path=theirs, dst=mine))

    def _mkdir(self, path: Any, mode: int = 0o777, *, dir_fd: Any = None) -> None:
        mine = self._mine(path)
        if mine is None:
            return self.real["mkdir"](path, mode, dir_fd=dir_fd)
        with self.lock:
            self.real["mkdir"](path, mode, dir_fd=dir_fd)
            self._add(Op("mkdir", path=mine))

    def _rmdir(self, path: Any, *, dir_fd: Any = None) -> None:
        mine = self._mine(path)
        if mine is None:
            return self.real["rmdir"](path, dir_fd=dir_fd)
        with self.lock:
            self.real["rmdir"](path, dir_fd=dir_fd)
            self._add(Op("rmdir", path=mine))


def copy_tree(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
