"""A directory on the local disk as the bucket: the embedded default.

Writes are atomic and create-only: the bytes go to a temporary file in the same file
system, are fsynced, then hard-linked into place (``link`` fails if the target exists, so
two writers can never overwrite each other) and the directory entry is fsynced. A batch's
objects (``put_many``) are all written and linked first, then flushed together. Where the
file system can (Linux: ext4, XFS, btrfs, tmpfs), the temporary file is an unnamed one
(``O_TMPFILE``): a crash leaves nothing behind, and no name is made and removed per object.

A directory has no storage classes, so the class an object was moved to is recorded in a
small file under ``.memplane-class/`` mirroring the object's path (portable, unlike extended
attributes). That tree is never listed or served as content; deleting an object deletes its
record (the record first, so nothing unlisted outlives a crash), and a put clears a record
left at the same path.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import sys
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from . import localdirs
from .base import (
    BucketDescription,
    HealthReport,
    InvalidPath,
    ObjectExists,
    ObjectInfo,
    ObjectNotFound,
    ObjectVersion,
    RequestStats,
    StorageClasses,
    StorageError,
    StorageUnavailable,
    check_path,
    check_prefix,
    timed_probe,
)
from .bounded import file_pieces

_TMP_DIR = ".memplane-tmp"
_CLASS_DIR = ".memplane-class"
_CHUNK = 1 << 20
CLASSES = StorageClasses("standard", "archive", "cold", ("standard", "archive", "cold"))


class LocalAdapter:
    scheme = "file"
    # A put costs about what a database lookup does (no network): a writer may put first
    # and check after, throwing the object away if it guessed wrong.
    cheap_puts = True

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True,
                 archive_class: str | None = None, cold_class: str | None = None) -> None:
        self.root = Path(root).resolve()
        self.fsync = fsync
        self.storage_classes = CLASSES.with_overrides(archive_class, cold_class)
        self._classes = self.root / _CLASS_DIR
        self._classes_text = str(self._classes)
        self.stats = RequestStats()
        self._tmp = self.root / _TMP_DIR
        self._tmp.mkdir(parents=True, exist_ok=True)
        self._root_text = str(self.root)
        self._tmp_text = str(self._tmp)
        # Directories this adapter made or found (a put then skips its mkdir); a link into
        # one removed since then is retried after making it again.
        self._dirs: set[str] = set()
        self._unnamed: bool | None = None  # O_TMPFILE works here (found at the first put)
        self._root_fd: int | None = None
        self._root_fd_lock = threading.Lock()

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> LocalAdapter:
        root = config.get("root") or config.get("bucket")
        if not root:
            raise ValueError("a local bucket needs 'root', the directory that holds the objects")
        return cls(str(root), fsync=str(config.get("fsync", "true")).lower() != "false",
                   archive_class=config.get("archive_class"),
                   cold_class=config.get("cold_class"))

    def _file(self, path: str) -> Path:
        return Path(self._target(path))

    def _target(self, path: str) -> str:
        """The object's file name (``check_path`` leaves no empty, ``.`` or ``..``
        segment, so joining the text is the path ``root / path`` names)."""
        check_path(path)
        if path.split("/", 1)[0] in (_TMP_DIR, _CLASS_DIR):
            raise InvalidPath(f"invalid object path {path!r}")
        if any(len(segment.encode()) > 255 for segment in path.split("/")):
            raise InvalidPath("a path segment is longer than 255 bytes")
        return f"{self._root_text}/{path}"

    def put(self, path: str, data: bytes) -> None:
        self._put(path, data, durable=self.fsync, classes=self._any_class())

    def _any_class(self) -> bool:
        """Whether a storage class was ever recorded in this bucket. If not, a put has no
        record to clear, and its link alone refuses an object that exists: one system call
        instead of two (and no path object) per put."""
        return os.path.isdir(self._classes_text)

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> list[StorageError | None]:
        """``put`` of each ``(path, data)``, made durable together: every object is written
        and linked into place first, then one ``syncfs`` flushes them all with their
        directory entries (elsewhere than Linux: the files and directories are fsynced side
        by side). A batch of 100 small objects takes about a third of the time of 100 puts
        on 16 threads; the flush also writes back whatever else the file system had
        pending, which a busy shared disk makes slower. Each item's answer: None (stored,
        and durable once this returns) or the error ``put`` would have raised. If the flush
        fails, every object it covered answers StorageUnavailable (written but not known
        durable: no pointer may name it)."""
        answers: list[StorageError | None] = []
        written: list[str] = []
        classes = self._any_class()
        for path, data in items:
            try:
                self._put(path, data, durable=False, classes=classes)
            except StorageError as exc:
                answers.append(exc)
                continue
            answers.append(None)
            written.append(self._target(path))
        if self.fsync and written:
            try:
                if _syncfs is not None:
                    self._sync_filesystem()
                else:
                    _fsync_all([*written, *dict.fromkeys(os.path.dirname(f) for f in written)])
            except OSError as exc:
                failed = StorageUnavailable(f"local write failed: {exc.strerror}")
                answers = [failed if answer is None else answer for answer in answers]
        return answers

    def _sync_filesystem(self) -> None:
        """``syncfs`` on the bucket's file system: every file and directory entry written
        before the call is durable when it returns. Called on a descriptor opened once, so
        a write-back error since the previous call is reported here, not lost."""
        assert _syncfs is not None
        with self._root_fd_lock:
            if self._root_fd is None:
                self._root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
            fd = os.dup(self._root_fd)  # the same open file (its error state); close() may run
        try:
            if _syncfs(fd) != 0:
                code = ctypes.get_errno()
                raise OSError(code, os.strerror(code))
        finally:
            os.close(fd)

    def _put(self, path: str, data: bytes | BinaryIO, *, durable: bool,
             classes: bool) -> None:
        target = self._target(path)
        self.stats.add("put")
        if classes:
            if os.path.exists(target):  # before clearing a record: it may be this object's
                raise ObjectExists(path)
            self._forget_class(path)
        parent = os.path.dirname(target)
        tmp: str | None = None
        try:
            if parent not in self._dirs:
                self._make_dir(parent)
            fd, tmp = self._temporary()
            try:
                _write_into(fd, data)
                if durable:
                    os.fsync(fd)
                self._link(fd, tmp, target, path)
            finally:
                os.close(fd)
            if durable:
                _fsync_path(parent)
        except OSError as exc:
            if isinstance(exc, ObjectExists):
                raise
            raise StorageUnavailable(f"local write failed: {exc.strerror}") from exc
        finally:
            if tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)

    def _make_dir(self, directory: str) -> None:
        # Its parent usually exists (the scope's directory, made for the scope's first key):
        # one mkdir, where makedirs would look at the parent first.
        try:
            os.mkdir(directory)
        except FileExistsError:
            if not os.path.isdir(directory):  # a file, or removed since by a delete
                localdirs.ensure_dir(directory)
        except FileNotFoundError:
            localdirs.ensure_dir(directory)
        if len(self._dirs) >= _KNOWN_DIRS:
            self._dirs.clear()
        self._dirs.add(directory)

    def _temporary(self) -> tuple[int, str | None]:
        """A file to write an object into before it is linked into place: unnamed where
        the file system allows (the name is None), else a new name under ``.memplane-tmp/``
        (the caller removes it)."""
        if self._unnamed is None:
            self._unnamed = self._unnamed_works()
        if self._unnamed and _UNNAMED_FLAGS is not None:
            return os.open(self._tmp_text, _UNNAMED_FLAGS, 0o600), None
        tmp = f"{self._tmp_text}/{_tmp_name()}"
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), tmp

    def _unnamed_works(self) -> bool:
        """Whether an ``O_TMPFILE`` file opens in this bucket and links into place through
        ``/proc/self/fd`` (Linux 3.11+, a file system that supports it, /proc mounted)."""
        if _UNNAMED_FLAGS is None:
            return False
        probe = f"{self._tmp_text}/{_tmp_name()}"
        try:
            fd = os.open(self._tmp_text, _UNNAMED_FLAGS, 0o600)
        except OSError:
            return False
        try:
            _link_unnamed(fd, probe)
        except OSError:
            return False
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)
        return True

    def _link(self, fd: int, tmp: str | None, target: str, path: str) -> None:
        """Link the written file into place; a directory a concurrent delete removed since
        it was made is made again (``localdirs.ATTEMPTS`` times at most)."""
        for attempt in range(1, localdirs.ATTEMPTS + 1):
            try:
                if tmp is None:
                    _link_unnamed(fd, target)
                else:
                    os.link(tmp, target)
                return
            except FileExistsError:
                raise ObjectExists(path) from None
            except FileNotFoundError:
                parent = os.path.dirname(target)
                if attempt == localdirs.ATTEMPTS or (tmp is not None
                                                     and not os.path.exists(tmp)):
                    raise
                self._dirs.discard(parent)
                self._make_dir(parent)

    def put_file(self, path: str, file: BinaryIO) -> None:
        """Like ``put``, copying ``file`` in chunks so memory stays bounded at any size."""
        self._put(path, file, durable=self.fsync, classes=self._any_class())

    def remove_stale_temporaries(self, older_than: float) -> int:
        """Delete temporary files (``.memplane-tmp/``) last modified before ``older_than``
        (a POSIX timestamp): what a process killed mid-``put`` leaves behind. Orphan GC calls
        it with its grace period, so a write still in flight keeps its file (with a grace of
        zero, one that is slow at that moment fails with ``StorageUnavailable``)."""
        removed = 0
        try:
            entries = list(os.scandir(self._tmp))
        except FileNotFoundError:
            return 0
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_mtime < older_than:
                    os.unlink(entry.path)
                    removed += 1
            except FileNotFoundError:
                continue
        return removed

    def iter_chunks(self, path: str, chunk_size: int = _CHUNK, max_bytes: int | None = None
                    ) -> Iterator[bytes]:
        target = self._file(path)
        self.stats.add("get")
        try:
            handle = open(target, "rb")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ObjectNotFound(path) from None
        except OSError as exc:
            raise StorageUnavailable(f"local read failed: {exc.strerror}") from exc
        with handle:
            yield from file_pieces(handle, max_bytes, path, chunk_size)

    def get(self, path: str, max_bytes: int | None = None) -> bytes:
        target = self._target(path)
        self.stats.add("get")
        try:
            with open(target, "rb", buffering=0) as handle:
                return b"".join(file_pieces(handle, max_bytes, path, (max_bytes or _CHUNK) + 1))
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ObjectNotFound(path) from None
        except OSError as exc:
            raise StorageUnavailable(f"local read failed: {exc.strerror}") from exc

    def head(self, path: str) -> ObjectInfo:
        target = self._file(path)
        self.stats.add("head")
        try:
            st = target.stat()
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectNotFound(path) from None
        if not target.is_file():
            raise ObjectNotFound(path)
        return ObjectInfo(path, st.st_size, datetime.fromtimestamp(st.st_mtime, UTC),
                          self._recorded_class(path))

    def storage_class_name(self, storage_class: str) -> str:
        return self.storage_classes.native(storage_class)

    def set_storage_class(self, path: str, storage_class: str) -> str:
        """Record the class next to the object (the bytes stay where they are)."""
        target = self._file(path)
        native = self.storage_class_name(storage_class)
        self.stats.add("set_storage_class")
        if not target.is_file():
            raise ObjectNotFound(path)
        if native == self.storage_classes.standard:
            self._forget_class(path)
            return native
        record = self._classes / path
        tmp = self._tmp / _tmp_name()
        try:
            localdirs.ensure_dir(str(record.parent))
            with open(tmp, "x", encoding="utf-8") as out:
                out.write(native)
                out.flush()
                if self.fsync:
                    os.fsync(out.fileno())
            os.replace(tmp, record)
            if self.fsync:
                _fsync_path(record.parent)
        except OSError as exc:
            raise StorageUnavailable(f"local write failed: {exc.strerror}") from exc
        finally:
            tmp.unlink(missing_ok=True)
        if not target.is_file():  # deleted meanwhile: no record may outlive its object
            self._forget_class(path)
            raise ObjectNotFound(path)
        return native

    def _recorded_class(self, path: str) -> str:
        try:
            recorded = (self._classes / path).read_text(encoding="utf-8").strip()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return self.storage_classes.standard
        except OSError as exc:
            raise StorageUnavailable(f"local read failed: {exc.strerror}") from exc
        return recorded if recorded in self.storage_classes.accepted \
            else self.storage_classes.standard

    def _forget_class(self, path: str) -> None:
        try:
            (self._classes / path).unlink()
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as exc:
            raise StorageUnavailable(f"local delete failed: {exc.strerror}") from exc

    def delete_many(self, paths: Iterable[str]) -> int:
        """Delete each object, then every directory (of objects and of class records) the
        deletes left empty, up to the bucket root: a directory name is part of an object
        path, and so may name a person (``localdirs.prune``)."""
        n = 0
        emptied: set[str] = set()
        for path in paths:
            target = self._file(path)
            self.stats.add("delete")
            n += 1
            emptied.add(os.path.dirname(str(target)))
            # The record first: a crash in between leaves the object, which listings (and so
            # erasure's verification and GC) still see, never a record nothing lists.
            self._forget_class(path)
            try:
                target.unlink()
            except (FileNotFoundError, NotADirectoryError):
                pass
            except OSError as exc:
                raise StorageUnavailable(f"local delete failed: {exc.strerror}") from exc
        self._dirs.difference_update(localdirs.prune_bucket(emptied, self._root_text,
                                                            self._classes_text))
        return n

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        self.stats.add("list")
        if prefix.split("/", 1)[0] in (_TMP_DIR, _CLASS_DIR):
            return
        head, _, _ = prefix.rpartition("/")
        start = self.root / head if head else self.root
        if not start.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames.sort()
            if Path(dirpath) == self.root:
                dirnames[:] = [d for d in dirnames if d not in (_TMP_DIR, _CLASS_DIR)]
            rel_dir = Path(dirpath).relative_to(self.root).as_posix()
            for name in sorted(filenames):
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if not rel.startswith(prefix):
                    continue
                try:
                    st = os.stat(os.path.join(dirpath, name))
                except FileNotFoundError:
                    continue
                yield ObjectInfo(rel, st.st_size, datetime.fromtimestamp(st.st_mtime, UTC))

    def list_versions(self, prefix: str) -> Iterator[ObjectVersion]:
        for info in self.list(prefix):
            yield ObjectVersion(
                info.path, None, is_latest=True, size=info.size, last_modified=info.last_modified
            )

    def purge_versions(self, prefix: str) -> int:
        return self.delete_many([info.path for info in self.list(prefix)])

    def describe(self) -> BucketDescription:
        return BucketDescription(backend="local", bucket=str(self.root))

    def health_check(self) -> HealthReport:
        return timed_probe(self, f"health/{uuid.uuid4().hex}")

    def close(self) -> None:
        with self._root_fd_lock:
            if self._root_fd is not None:
                os.close(self._root_fd)
                self._root_fd = None


def _write_into(fd: int, data: bytes | BinaryIO) -> None:
    """Write bytes, or a file's content copied in chunks (memory bounded at any size)."""
    if isinstance(data, bytes | bytearray | memoryview):
        os.write(fd, data) if len(data) < (1 << 30) else _write_all(fd, data)
        return
    while chunk := data.read(_CHUNK):
        _write_all(fd, chunk)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


_KNOWN_DIRS = 65536
# O_TMPFILE (it includes O_DIRECTORY) where the platform defines it.
_UNNAMED_FLAGS: int | None = (os.O_TMPFILE | os.O_WRONLY) if hasattr(os, "O_TMPFILE") else None
_TMP_PREFIX = uuid.uuid4().hex[:16]
_tmp_count = itertools.count()


def _link_unnamed(fd: int, target: str) -> None:
    """Give the unnamed file open as ``fd`` the name ``target``: ``linkat`` following
    ``/proc/self/fd/N`` (no privilege needed, unlike ``AT_EMPTY_PATH``). Python calls
    ``linkat`` only when given a directory descriptor; the source path is absolute, so the
    kernel never looks at the one passed."""
    os.link(f"/proc/self/fd/{fd}", target, src_dir_fd=fd, follow_symlinks=True)


def _tmp_name() -> str:
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


_syncfs = _find_syncfs()
_flushers: ThreadPoolExecutor | None = None
_flushers_lock = threading.Lock()


def _fsync_all(paths: list[str]) -> None:
    """fsync every file or directory in ``paths``, side by side (the calls wait on the
    disk, not on the interpreter); the first failure is raised once all have ended."""
    global _flushers
    with _flushers_lock:
        if _flushers is None:
            _flushers = ThreadPoolExecutor(max_workers=16, thread_name_prefix="memplane-fsync")
    errors = [e for e in _flushers.map(_fsync_quietly, paths) if e is not None]
    if errors:
        raise errors[0]


def _fsync_quietly(path: str) -> OSError | None:
    try:
        _fsync_path(path)
    except OSError as exc:
        return exc
    return None


def _fsync_path(path: str | Path) -> None:
    """fsync a file or a directory (opened read-only: either can be)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
