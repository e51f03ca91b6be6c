"""Directories of a local bucket: made again when a delete removed them, removed once empty.

Directory names in a bucket are object paths, and object paths carry scope refs and keys
(``memories/user/bob/diet/``): after the last object under one goes, its directory would
keep naming a person. ``prune`` removes each emptied directory up to (never including) the
bucket root. It only ever calls ``rmdir``, which refuses a directory that is not empty, so
an object linked into it meanwhile stays; a put racing a prune makes the directory again
(``ensure_dir``) and retries its link (``LocalAdapter._link``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable

# How often a put makes its directory again after a concurrent delete removed it. Each
# retry follows a removal of an empty directory by another writer: a put loses only if
# other threads empty and remove its directory this many times between its mkdir and its
# link.
ATTEMPTS = 64


def ensure_dir(directory: str) -> None:
    """``makedirs(exist_ok=True)`` that survives a concurrent prune: a parent removed
    between two of its mkdirs, or the directory removed between its mkdir and its check."""
    for attempt in range(ATTEMPTS):
        try:
            os.makedirs(directory, exist_ok=True)
            return
        except (FileNotFoundError, FileExistsError):
            if attempt == ATTEMPTS - 1 or _not_a_directory(directory):
                raise


def _not_a_directory(path: str) -> bool:
    """Whether ``path`` names something that is not a directory, in one look: two looks
    (exists, then is a directory) see a directory another put made and a prune removed
    in between as a file."""
    try:
        return not stat.S_ISDIR(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False  # gone (or under a file): makedirs says which, next attempt


def prune(directories: Iterable[str], root: str) -> list[str]:
    """Remove each of ``directories`` and its parents below ``root`` while they are empty,
    deepest first; returns the directories removed. A directory not empty, already gone or
    outside ``root`` ends its chain quietly."""
    removed: list[str] = []
    stop = root.rstrip("/")
    for start in sorted(set(directories), key=lambda d: d.count("/"), reverse=True):
        current = start.rstrip("/")
        while current.startswith(stop + "/"):
            try:
                os.rmdir(current)
            except FileNotFoundError:
                pass  # another delete removed it; its parent may be empty now
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.EBUSY, errno.EACCES,
                                 errno.EPERM, errno.ENOTDIR):
                    break
                raise
            else:
                removed.append(current)
            current = os.path.dirname(current)
    return removed


def prune_bucket(directories: set[str], root: str, records: str) -> list[str]:
    """After deletes in a bucket: ``prune`` the directories that held the deleted objects,
    and their mirrors under the storage-class records' tree ``records``; returns the object
    directories removed. For deletes that already succeeded: a directory that cannot be
    removed is left (the objects are gone either way)."""
    if not directories:
        return []
    removed: list[str] = []
    with contextlib.suppress(OSError):
        removed = prune(directories, root)
    with contextlib.suppress(OSError):
        prune({records + d[len(root):] for d in directories if d.startswith(root + "/")},
              records)
    return removed
