"""An erasure's walk through the buckets: deleting the subject's objects, checking by listing
that they are gone, sweeping what is left under the subject's prefixes, and listing every
version there for the verification (steps 3–6 of ``erasure.py``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any
from urllib.parse import quote

from sqlalchemy.orm import Session

from storage_adapters import base as storage

from ..memories import repository as memories_repo
from ..plane.data_plane import Target, storage_errors
from . import subjects


class ErasureIncomplete(Exception):
    """Verification found something of the subject still present."""


def events_prefix(user_id: str) -> str:
    """The subject's own event directory (events in scope ``user``) under a target."""
    return f"events/user/{quote(user_id, safe='')}/"


class SubjectObjects:
    """The subject's objects in the tenant's bucket locations; each location's description
    (versioning, retention) read once."""

    def __init__(self, session: Session, user_id: str) -> None:
        self.session = session
        self.user_id = user_id
        self._descriptions: dict[uuid.UUID, storage.BucketDescription] = {}

    def versioned(self, target: Target) -> bool:
        return bool(getattr(target, "versioned", False)) or self.describe(target).versioning

    def describe(self, target: Target) -> storage.BucketDescription:
        if target.config_id not in self._descriptions:
            with storage_errors():
                self._descriptions[target.config_id] = target.adapter.describe()
        return self._descriptions[target.config_id]

    def check_gone(self, target: Target, deleted: list[str]) -> None:
        """List each directory that held a deleted object: none may still be there (on a
        versioned bucket, no version or marker of it either)."""
        gone = set(deleted)
        versioned = self.versioned(target)
        with storage_errors():
            for directory in sorted({path.rsplit("/", 1)[0] + "/" for path in deleted}):
                listing = (target.adapter.list_versions(directory) if versioned
                           else target.adapter.list(directory))
                if any(entry.path in gone for entry in listing):
                    raise ErasureIncomplete("an object of the subject is still listed after "
                                            "its deletion")

    def delete_objects(self, target: Target, pointers: list[Any],
                       started: datetime) -> tuple[int, int, int, int]:
        """Delete the batch's objects in one location; verify the ones outside the prefix."""
        inside = target.path(subjects.user_prefix(self.user_id))
        paths = [p.storage_path for p in pointers]
        paths += [p.embedding_storage_path for p in pointers if p.embedding_storage_path]
        outside = [path for path in paths if not path.startswith(inside)]
        versions = 0
        with storage_errors():
            if self.versioned(target):
                # Inside the subject's prefix a delete marker is enough for now: the sweep
                # purges every version and marker there in one listing.
                inside_paths = [path for path in paths if path.startswith(inside)]
                if inside_paths:
                    target.adapter.delete_many(inside_paths)
                if outside:  # one listing per scope directory, deletes in batches
                    purged = storage.purge_paths(target.adapter, outside)
                    # each path's current version is counted as an object already
                    versions += max(0, purged - len(outside))
            else:
                target.adapter.delete_many(paths)
        orphans = self._check_outside(target, outside, started)
        return len(paths), versions, orphans, len(outside)

    def _check_outside(self, target: Target, deleted: list[str], started: datetime) -> int:
        """List each scope directory that held a deleted object outside the subject's prefix:
        none of the deleted objects may remain; older copies of the same keys that no pointer
        names (superseded versions a crash left) are removed as well."""
        if not deleted:
            return 0
        gone = set(deleted)
        key_dirs = {path.rsplit("/", 1)[0] + "/" for path in deleted}
        scope_dirs = {key.rstrip("/").rsplit("/", 1)[0] + "/" for key in key_dirs}
        versioned = self.versioned(target)
        leftovers: list[str] = []
        with storage_errors():
            for scope_dir in sorted(scope_dirs):
                listing = (target.adapter.list_versions(scope_dir) if versioned
                           else target.adapter.list(scope_dir))
                for entry in listing:
                    if entry.path in gone:
                        raise ErasureIncomplete("an object of the subject is still listed "
                                                "after its deletion")
                    if (entry.path.rsplit("/", 1)[0] + "/" in key_dirs
                            and entry.last_modified is not None
                            and entry.last_modified < started):
                        leftovers.append(entry.path)
        if not leftovers:
            return 0
        named = memories_repo.named_paths(self.session, target.config_id, leftovers)
        self.session.commit()
        orphans = sorted(set(leftovers) - named)
        with storage_errors():
            if versioned:
                for path in orphans:
                    target.adapter.purge_versions(path)
            else:
                target.adapter.delete_many(orphans)
        return len(orphans)

    def sweep(self, target: Target, export_jobs: list[uuid.UUID]) -> tuple[int, int, int]:
        """Every object (and version) left under the subject's prefixes in one location, and
        the archives of the subject's earlier exports: orphans, versions and export objects
        removed."""
        orphans = versions = exports = 0
        prefix = subjects.user_prefix(self.user_id)
        with storage_errors():
            for full in (target.path(prefix), target.path(events_prefix(self.user_id))):
                listed = [info.path for info in target.adapter.list(full)]
                orphans += target.adapter.delete_many(listed) if listed else 0
                if self.versioned(target):
                    versions += target.adapter.purge_versions(full)
            for job_id in export_jobs:
                export_prefix = target.path("exports", str(job_id)) + "/"
                found = [info.path for info in target.adapter.list(export_prefix)]
                exports += len(found)
                if found:
                    target.adapter.delete_many(found)
                if self.versioned(target):
                    target.adapter.purge_versions(export_prefix)
        return orphans, versions, exports

    def remaining(self, target: Target) -> int:
        """How many objects, versions and markers are left under the subject's prefixes in
        one location."""
        remaining = 0
        with storage_errors():
            for prefix in (subjects.user_prefix(self.user_id), events_prefix(self.user_id)):
                remaining += sum(1 for _ in target.adapter.list_versions(target.path(prefix)))
        return remaining
