"""Moving memories' and events' objects to the bucket's colder storage class.

The protocol, per item (a memory's pointer or an event), keeps the row from ever claiming a
colder class than its object has:

1. read the rows (tenant-filtered; rows whose subject is being erased are left out) and
   end the read transaction, so no database lock is held while the bucket works;
2. move the object through the adapter (``set_storage_class``, a no-op when the object is
   already there), then the memory's vector object if it has one;
3. one transaction per chunk: record the class on each row *only if it still names the same
   synced object*, and append one ``archive`` audit row per item (failures included).

A crash between 2 and 3 leaves objects colder than their rows say — the row under-claims,
never over-claims — and the next run moves nothing (the adapter sees the class) but records
it. A row that changed meanwhile (a new version, a delete) is not marked; if no row names the
object any more, it is deleted again, since moving it by rewriting (S3's copy onto itself)
could have brought back an object a concurrent delete had just removed.

Writes of a new version reset the row's class (a new object starts in the default class);
reads, export and erasure are unchanged: the classes offered all read back at once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from storage_adapters import base as storage

from ..audit import service as audit
from ..db.engine import begin_write
from ..errors import InvalidInput
from ..identity import Actor
from ..plane.data_plane import DataPlane, Target
from . import repository as repo
from .repository import Item

log = logging.getLogger(__name__)

ARCHIVE = "archive"
CHUNK = 100
_WORKERS = 4


@dataclass
class ArchiveReport:
    """What one run did. ``archived``: moved and recorded now; ``skipped``: the row already
    recorded that class; ``not_archivable``: not synced, its object missing, or the row
    changed while it was being moved; ``failed``: the bucket refused or was unreachable —
    left as it was, the next run tries again; ``not_found``: no such row of the tenant (or
    its subject is being erased)."""

    archived: int = 0
    skipped: int = 0
    not_archivable: int = 0
    failed: int = 0
    not_found: int = 0
    storage_classes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Moved:
    item: Item
    storage_class: str | None  # the backend's name, when the object is there now
    problem: str | None = None  # why not: not_synced, missing, or a storage problem code


def archive_pointers(session: Session, plane: DataPlane, tenant_id: uuid.UUID,
                     pointer_ids: Iterable[uuid.UUID], storage_class: str | None = None, *,
                     actor: Actor | None = None) -> int:
    """Move these memories' objects (and their vector objects) to ``storage_class`` — a
    generic name (``archive``, ``cold``, ``standard``) or the backend's own; None: the
    adapter's ``archive`` class — and record it on each pointer. Returns how many were moved
    now; already archived ones are skipped (see :func:`archive` for every count)."""
    return archive(session, plane, tenant_id, pointer_ids=pointer_ids,
                   storage_class=storage_class, actor=actor).archived


def archive_events(session: Session, plane: DataPlane, tenant_id: uuid.UUID,
                   event_ids: Iterable[uuid.UUID], storage_class: str | None = None, *,
                   actor: Actor | None = None) -> int:
    """Like :func:`archive_pointers`, for events' body objects."""
    return archive(session, plane, tenant_id, event_ids=event_ids,
                   storage_class=storage_class, actor=actor).archived


def archive(session: Session, plane: DataPlane, tenant_id: uuid.UUID, *,
            pointer_ids: Iterable[uuid.UUID] = (), event_ids: Iterable[uuid.UUID] = (),
            storage_class: str | None = None, actor: Actor | None = None) -> ArchiveReport:
    """The archive protocol (module docstring) over memories and events, in chunks.

    Commits: the bucket is not in the transaction, so each chunk's rows are read in one
    transaction that ends before the objects move, and recorded in another after.
    Raises InvalidInput (before touching anything) for a class name no backend involved
    knows.
    """
    actor = actor or Actor(tenant_id, "system", ARCHIVE)
    wanted = storage_class or ARCHIVE
    report = ArchiveReport()
    for kind, ids in (("pointer", list(dict.fromkeys(pointer_ids))),
                      ("event", list(dict.fromkeys(event_ids)))):
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start:start + CHUNK]
            _archive_chunk(session, plane, actor, kind, chunk, wanted, report)
    return report


def _archive_chunk(session: Session, plane: DataPlane, actor: Actor, kind: str,
                   ids: Sequence[uuid.UUID], wanted: str, report: ArchiveReport) -> None:
    tenant_id = actor.tenant_id
    items = (repo.pointers if kind == "pointer" else repo.events)(session, tenant_id, ids)
    targets = {cid: plane.by_id(session, cid) for cid in {i.storage_config_id for i in items}}
    session.commit()  # no transaction (and no SQLite lock) while the bucket works
    report.not_found += len(ids) - len(items)
    natives = {cid: _native(t, wanted) for cid, t in targets.items()}
    todo: list[Item] = []
    for item in items:
        if item.storage_class == natives[item.storage_config_id]:
            report.skipped += 1
        else:
            todo.append(item)
    if not todo:
        return
    with ThreadPoolExecutor(min(_WORKERS, len(todo)), thread_name_prefix="archive") as pool:
        moved = list(pool.map(
            lambda i: _move(targets[i.storage_config_id], i, natives[i.storage_config_id]),
            todo))
    plane.checkpoint("archive:after_move")
    _record(session, plane, actor, moved, targets, report)


def _native(target: Target, wanted: str) -> str:
    try:
        return target.adapter.storage_class_name(wanted)
    except storage.InvalidStorageClass as exc:
        raise InvalidInput(str(exc), problem="invalid_storage_class") from None


def _move(target: Target, item: Item, native: str) -> _Moved:
    if item.sync_status != "synced":
        return _Moved(item, None, "not_synced")
    try:
        now = target.adapter.set_storage_class(item.storage_path, native)
    except storage.ObjectNotFound:
        return _Moved(item, None, "missing")
    except storage.StorageError as exc:
        return _Moved(item, None, _problem(exc))
    if item.embedding_path:
        try:
            target.adapter.set_storage_class(item.embedding_path, native)
        except storage.ObjectNotFound:
            pass  # no vector stored (yet): the content object is what counts
        except storage.StorageError as exc:
            # The content object is colder already; the row stays unmarked, so the next run
            # moves the vector and records both.
            return _Moved(item, None, _problem(exc))
    return _Moved(item, now)


def _problem(exc: storage.StorageError) -> str:
    """A generic code for the audit row: never the message, which may quote the remote."""
    if isinstance(exc, storage.StorageUnavailable | storage.StorageAuthError):
        return storage.problem_code(exc)
    # The store answered but did not do it (kept the old class, the object changed meanwhile).
    return "store_refused"


def _record(session: Session, plane: DataPlane, actor: Actor, moved: list[_Moved],
            targets: dict[uuid.UUID, Target], report: ArchiveReport) -> None:
    """Step 3: mark the rows that still name the moved objects, audit every item."""
    stale: list[Item] = []
    begin_write(session)
    try:
        for result in moved:
            item = result.item
            pointer_id = item.id if item.kind == "pointer" else None
            event_id = item.id if item.kind == "event" else None
            if result.storage_class is None:
                failed = result.problem not in ("not_synced", "missing")
                report.failed += failed
                report.not_archivable += not failed
                audit.record(session, actor, ARCHIVE, success=False,
                             detail=f"{item.kind} not archived: {result.problem}",
                             pointer_id=pointer_id, event_id=event_id)
                continue
            if repo.mark(session, actor.tenant_id, item, result.storage_class):
                report.archived += 1
                report.storage_classes[result.storage_class] = (
                    report.storage_classes.get(result.storage_class, 0) + 1)
                audit.record(session, actor, ARCHIVE,
                             detail=f"{item.kind} to {result.storage_class}",
                             pointer_id=pointer_id, event_id=event_id)
            else:
                report.not_archivable += 1
                audit.record(session, actor, ARCHIVE, success=False,
                             detail=f"{item.kind} not archived: changed meanwhile",
                             pointer_id=pointer_id, event_id=event_id)
                if not repo.path_named(session, actor.tenant_id, item):
                    stale.append(item)
        session.commit()
    except BaseException:
        session.rollback()
        raise
    for item in stale:
        # Superseded or deleted while it moved: make sure it stays deleted (best effort;
        # orphan GC removes anything left).
        try:
            targets[item.storage_config_id].delete([item.storage_path])
        except storage.StorageError as exc:
            log.warning("archive: could not delete a superseded object again (%s)",
                        storage.problem_code(exc))
