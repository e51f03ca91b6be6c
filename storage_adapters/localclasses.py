"""The storage classes of a local bucket's objects, recorded beside them.

A directory has no storage classes, so the class an object was moved to is recorded in a
small file under ``.memplane-class/`` mirroring the object's path (portable, unlike extended
attributes). That tree is never listed or served as content; deleting an object deletes its
record (the record first, so nothing unlisted outlives a crash), and a put clears a record
left at the same path.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import localdirs
from .base import StorageUnavailable
from .localfiles import fsync_all, tmp_name

CLASS_DIR = ".memplane-class"


class ClassRecords:
    """The ``.memplane-class/`` tree under a bucket's ``root``; records are written through
    a temporary file in ``tmp`` and replace the previous one at once."""

    def __init__(self, root: Path, tmp: Path) -> None:
        self.dir = root / CLASS_DIR
        self.dir_text = str(self.dir)
        self._tmp = tmp

    def any_recorded(self) -> bool:
        """Whether a storage class was ever recorded in this bucket. If not, a put has no
        record to clear, and its link alone refuses an object that exists: one system call
        instead of two (and no path object) per put."""
        return os.path.isdir(self.dir_text)

    def write(self, path: str, storage_class: str, *, durable: bool) -> None:
        """Record ``storage_class`` for the object at ``path``. If ``durable``, the record is
        fsynced before it replaces the previous one, then its directory and the parent of
        each directory made for it: a new directory's name is durable only once its parent
        is flushed, and a crash that took the record would leave the database claiming a
        class the object does not have."""
        record = self.dir / path
        tmp = self._tmp / tmp_name()
        try:
            made = _missing(record.parent, self.dir.parent)
            localdirs.ensure_dir(str(record.parent))
            with open(tmp, "x", encoding="utf-8") as out:
                out.write(storage_class)
                out.flush()
                if durable:
                    os.fsync(out.fileno())
            os.replace(tmp, record)
            if durable:
                fsync_all([str(record.parent), *(str(d.parent) for d in made)])
        except OSError as exc:
            raise StorageUnavailable(f"local write failed: {exc.strerror}") from exc
        finally:
            tmp.unlink(missing_ok=True)

    def read(self, path: str) -> str | None:
        """The class recorded for the object at ``path``, None if none is."""
        try:
            return (self.dir / path).read_text(encoding="utf-8").strip()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            raise StorageUnavailable(f"local read failed: {exc.strerror}") from exc

    def forget(self, path: str) -> None:
        try:
            (self.dir / path).unlink()
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as exc:
            raise StorageUnavailable(f"local delete failed: {exc.strerror}") from exc


def _missing(directory: Path, root: Path) -> list[Path]:
    """``directory`` and its parents below ``root`` that do not exist (yet), deepest first."""
    missing: list[Path] = []
    while directory != root and not directory.is_dir():
        missing.append(directory)
        directory = directory.parent
    return missing
