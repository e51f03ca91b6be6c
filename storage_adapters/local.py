"""A directory on the local disk as the bucket: the embedded default.

Writes are atomic and create-only: the bytes go to a temporary file in the same file
system, are fsynced, then hard-linked into place (``link`` fails if the target exists, so
two writers can never overwrite each other) and the directory entry is fsynced; a directory
the put had to make has its own entry fsynced in its parent first (else a crash could lose
the new directory, and the acknowledged object with it). A delete fsyncs the directories it
removed names from before it returns. A batch's
objects (``put_many``) are all written and linked first, then flushed together. Where the
file system can (Linux: ext4, XFS, btrfs, tmpfs), the temporary file is an unnamed one
(``O_TMPFILE``): a crash leaves nothing behind, and no name is made and removed per object.
The file-system calls those writes are made of are storage_adapters/localfiles.

A directory has no storage classes: the class an object was moved to is recorded beside it
(storage_adapters/localclasses).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from . import localdirs, localfiles
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
from .localclasses import CLASS_DIR, ClassRecords
from .localfiles import CHUNK, fsync_all, fsync_path, link_unnamed, tmp_name, write_into

_TMP_DIR = ".memplane-tmp"
CLASSES = StorageClasses("standard", "archive", "cold", ("standard", "archive", "cold"))
_KNOWN_DIRS = 65536


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
        self.stats = RequestStats()
        self._tmp = self.root / _TMP_DIR
        self._tmp.mkdir(parents=True, exist_ok=True)
        self._records = ClassRecords(self.root, self._tmp)
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
        if path.split("/", 1)[0] in (_TMP_DIR, CLASS_DIR):
            raise InvalidPath(f"invalid object path {path!r}")
        if any(len(segment.encode()) > 255 for segment in path.split("/")):
            raise InvalidPath("a path segment is longer than 255 bytes")
        return f"{self._root_text}/{path}"

    def put(self, path: str, data: bytes) -> None:
        self._put(path, data, durable=self.fsync, classes=self._records.any_recorded())

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
        classes = self._records.any_recorded()
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
                if localfiles.syncfs is not None:
                    self._sync_filesystem()
                else:
                    fsync_all([*written, *dict.fromkeys(os.path.dirname(f) for f in written)])
            except OSError as exc:
                failed = StorageUnavailable(f"local write failed: {exc.strerror}")
                answers = [failed if answer is None else answer for answer in answers]
        return answers

    def _sync_filesystem(self) -> None:
        """``syncfs`` on the bucket's file system: every file and directory entry written
        before the call is durable when it returns. Called on a descriptor opened once, so
        a write-back error since the previous call is reported here, not lost."""
        assert localfiles.syncfs is not None
        with self._root_fd_lock:
            if self._root_fd is None:
                self._root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
            fd = os.dup(self._root_fd)  # the same open file (its error state); close() may run
        try:
            if localfiles.syncfs(fd) != 0:
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
            self._records.forget(path)
        parent = os.path.dirname(target)
        tmp: str | None = None
        try:
            if parent not in self._dirs:
                self._make_dir(parent, durable)
            fd, tmp = self._temporary()
            try:
                write_into(fd, data)
                if durable:
                    os.fsync(fd)
                self._link(fd, tmp, target, path, durable)
            finally:
                os.close(fd)
            if durable:
                fsync_path(parent)
        except OSError as exc:
            if isinstance(exc, ObjectExists):
                raise
            raise StorageUnavailable(f"local write failed: {exc.strerror}") from exc
        finally:
            if tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)

    def _make_dir(self, directory: str, durable: bool) -> None:
        """Make the directory an object goes into (and its missing parents). If ``durable``,
        each directory's entry in its parent is fsynced before the object is linked: POSIX
        makes a new name durable only with its directory's fsync, so a directory whose entry
        did not reach the disk takes the acknowledged object with it in a crash
        (tests/crashstates). One already there (another put made it, maybe not yet flushed)
        has its parent fsynced too, once, before this adapter remembers it."""
        # Its parent usually exists (the scope's directory, made for the scope's first key):
        # one mkdir, where makedirs would look at the parent first.
        made = [directory]
        try:
            os.mkdir(directory)
        except FileExistsError:
            if not os.path.isdir(directory):  # a file, or removed since by a delete
                made = self._ensure_dir(directory)
        except FileNotFoundError:
            made = self._ensure_dir(directory)
        if durable:
            try:
                fsync_all(list(dict.fromkeys(os.path.dirname(d) for d in made)))
            except FileNotFoundError:
                return  # a delete's prune removed it meanwhile: the link's retry makes it again
        if len(self._dirs) >= _KNOWN_DIRS:
            self._dirs.clear()
        self._dirs.add(directory)

    def _ensure_dir(self, directory: str) -> list[str]:
        """``localdirs.ensure_dir``; returns the directories that were missing before (up to
        the bucket root), whose entries a durable put must flush."""
        missing: list[str] = []
        current = directory
        while current.startswith(self._root_text + "/") and not os.path.isdir(current):
            missing.append(current)
            current = os.path.dirname(current)
        localdirs.ensure_dir(directory)
        return missing or [directory]

    def _temporary(self) -> tuple[int, str | None]:
        """A file to write an object into before it is linked into place: unnamed where
        the file system allows (the name is None), else a new name under ``.memplane-tmp/``
        (the caller removes it)."""
        if self._unnamed is None:
            self._unnamed = self._unnamed_works()
        if self._unnamed and localfiles.UNNAMED_FLAGS is not None:
            return os.open(self._tmp_text, localfiles.UNNAMED_FLAGS, 0o600), None
        tmp = f"{self._tmp_text}/{tmp_name()}"
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), tmp

    def _unnamed_works(self) -> bool:
        """Whether an ``O_TMPFILE`` file opens in this bucket and links into place through
        ``/proc/self/fd`` (Linux 3.11+, a file system that supports it, /proc mounted)."""
        if localfiles.UNNAMED_FLAGS is None:
            return False
        probe = f"{self._tmp_text}/{tmp_name()}"
        try:
            fd = os.open(self._tmp_text, localfiles.UNNAMED_FLAGS, 0o600)
        except OSError:
            return False
        try:
            link_unnamed(fd, probe)
        except OSError:
            return False
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)
        return True

    def _link(self, fd: int, tmp: str | None, target: str, path: str, durable: bool) -> None:
        """Link the written file into place; a directory a concurrent delete removed since
        it was made is made again (``localdirs.ATTEMPTS`` times at most)."""
        for attempt in range(1, localdirs.ATTEMPTS + 1):
            try:
                if tmp is None:
                    link_unnamed(fd, target)
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
                self._make_dir(parent, durable)

    def put_file(self, path: str, file: BinaryIO) -> None:
        """Like ``put``, copying ``file`` in chunks so memory stays bounded at any size."""
        self._put(path, file, durable=self.fsync, classes=self._records.any_recorded())

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

    def iter_chunks(self, path: str, chunk_size: int = CHUNK, max_bytes: int | None = None
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
                return b"".join(file_pieces(handle, max_bytes, path, (max_bytes or CHUNK) + 1))
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
            self._records.forget(path)
            return native
        self._records.write(path, native, durable=self.fsync)
        if not target.is_file():  # deleted meanwhile: no record may outlive its object
            self._records.forget(path)
            raise ObjectNotFound(path)
        return native

    def _recorded_class(self, path: str) -> str:
        recorded = self._records.read(path)
        return recorded if recorded is not None and recorded in self.storage_classes.accepted \
            else self.storage_classes.standard

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
            self._records.forget(path)
            try:
                target.unlink()
            except (FileNotFoundError, NotADirectoryError):
                pass
            except OSError as exc:
                raise StorageUnavailable(f"local delete failed: {exc.strerror}") from exc
        removed = localdirs.prune_bucket(emptied, self._root_text, self._records.dir_text)
        self._dirs.difference_update(removed)
        if self.fsync and emptied:
            self._flush_removals(emptied, removed)
        return n

    def _flush_removals(self, emptied: set[str], removed: list[str]) -> None:
        """fsync the directories the deletes removed names from (an object's, or for a
        directory pruned, its parent's): until then a crash may bring a deleted object back,
        after its pointer and GC's tombstone are gone (tests/crashstates)."""
        gone = set(removed)
        flush = {d for d in emptied if d not in gone}
        flush.update(os.path.dirname(d) for d in gone)
        flush -= gone
        try:
            fsync_all(sorted(d for d in flush if os.path.isdir(d)))
        except FileNotFoundError:
            pass  # pruned meanwhile by another delete, which flushes the parent itself
        except OSError as exc:
            raise StorageUnavailable(f"local delete failed: {exc.strerror}") from exc

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        self.stats.add("list")
        if prefix.split("/", 1)[0] in (_TMP_DIR, CLASS_DIR):
            return
        head, _, _ = prefix.rpartition("/")
        start = self.root / head if head else self.root
        if not start.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames.sort()
            if Path(dirpath) == self.root:
                dirnames[:] = [d for d in dirnames if d not in (_TMP_DIR, CLASS_DIR)]
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

