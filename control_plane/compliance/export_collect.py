"""What an export collects: every pointer of the subject — those whose ``subject_user_id`` is
the user and every pointer in the ``user`` scope with that ``scope_ref``; memories by key and
curated entries alike — each value read verified (hash-checked, decrypted where encryption
is on; a window of values side by side, ``export_items``), then every raw event of the
subject (same selection on ``memory_events``) through ``events.service.read_bodies``
(hash-checked too). Each value and body goes into the archive, and its description into the
manifest's ``items`` or ``events``; one whose object is missing or fails its hash is listed
with that status (and again in ``not_exported``), never silently dropped. Each page is
audited (``export``, one row per item) and counted in the job's progress."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import IO, Any

from ..audit import service as audit
from ..db.engine import begin_write
from ..db.models import MemoryEvent, MemoryPointer
from ..errors import HashMismatch
from ..events import repository as events_repo
from ..events import service as events
from ..jobs.service import JobContext
from ..memories.api import serialise
from . import export_items, subjects
from .zipwriter import ZipWriter

PAGE = 200
SELECTION = ("pointers (memories and entries) and raw events whose user_id is the subject, "
             "and every pointer and event in scope 'user' whose scope_ref is the subject")


def collect(ctx: JobContext, archive: ZipWriter, items_file: IO[bytes],
            events_file: IO[bytes]) -> tuple[dict[str, int], list[dict[str, str]]]:
    """Every value and event body of the subject added to ``archive``, their manifest
    entries written to ``items_file`` and ``events_file`` (comma-separated JSON objects);
    the counts, and what was not exported and why."""
    session = ctx.session
    assert ctx.subject is not None
    counts = {"pointers": 0, "exported": 0, "missing": 0, "corrupt": 0,
              "deleted_during_export": 0, "bytes": 0, "entries": 0, "events": 0,
              "events_exported": 0, "events_missing": 0, "events_corrupt": 0}
    not_exported: list[dict[str, str]] = []
    reader = export_items.Reader(session, ctx.plane, ctx.actor)
    after: uuid.UUID | None = None
    while True:
        page = list(subjects.pointer_page(session, ctx.tenant_id, ctx.subject, after, PAGE))
        session.commit()
        if not page:
            break
        previous: export_items.Started | None = None
        for window in [*reader.windows(page), None]:
            if window is not None:
                for _ in window:  # race tests: the page is read, the window's items not
                    ctx.checkpoint("before_item")
            reading = None if window is None else reader.start(window)
            # the window before is written while this one is read
            for read in reader.finish(previous) if previous is not None else ():
                _add_item(archive, read, items_file, counts, not_exported)
            previous = reading
        _audit_page(ctx, "pointer_id", [p.id for p in page],
                    exported_pointers=counts["pointers"])
        after = page[-1].id
    _export_events(ctx, archive, events_file, counts, not_exported)
    not_exported.append({"what": "embeddings",
                         "why": "derived vectors (and the search snapshots holding "
                                "them), recomputable from the exported values"})
    not_exported.append({"what": "access audit rows",
                         "why": "records about access, not the subject's memories; "
                                "available to the controller through GET /v1/audit"})
    return counts, not_exported


_WHY = {
    "missing": "the object is missing from the bucket; the pointer is marked corrupt",
    "corrupt": "the object does not match its recorded SHA-256; the pointer is marked corrupt",
    "deleted_during_export": "the memory was deleted while the export ran",
}


_EVENT_WHY = {
    "missing": "the event's body is missing from the bucket; the event is marked corrupt",
    "corrupt": "the event's body does not match its recorded SHA-256 (or does not decrypt); "
               "the event is marked corrupt",
}


def _export_events(ctx: JobContext, archive: ZipWriter, events_file: IO[bytes],
                   counts: dict[str, int], not_exported: list[dict[str, str]]) -> None:
    """Every raw event of the subject, a page at a time: metadata in the manifest, the
    hash-verified body in ``events/<id>.json``."""
    session = ctx.session
    assert ctx.subject is not None
    after: uuid.UUID | None = None
    first = True
    while True:
        page = list(events_repo.subject_page(session, ctx.tenant_id, ctx.subject, after, PAGE))
        session.commit()
        if not page:
            return
        ctx.checkpoint("before_events")
        bodies, failed = _event_bodies(ctx, page)
        for event in page:
            item: dict[str, Any] = {**_describe_event(event), "status": "exported",
                                    "file": None, "file_sha256": None, "hash_verified": False}
            counts["events"] += 1
            if event.id in failed:
                item["status"] = failed[event.id]
                counts[f"events_{failed[event.id]}"] += 1
                not_exported.append({"what": "raw event body", "event_id": str(event.id),
                                     "why": _EVENT_WHY[failed[event.id]]})
            else:
                data = serialise(bodies[event.id])
                name = f"events/{event.id}.json"
                archive.add_bytes(name, data)
                digest = hashlib.sha256(data).hexdigest()
                item.update(file=name, file_sha256=digest,
                            hash_verified=digest == event.content_sha256)
                counts["events_exported"] += 1
            events_file.write((b"" if first else b",") + _dumps(item))
            first = False
        _audit_page(ctx, "event_id", [e.id for e in page], exported_events=counts["events"])
        after = page[-1].id


def _audit_page(ctx: JobContext, field: str, ids: list[uuid.UUID], **progress: int) -> None:
    """An ``export`` audit row for each item of a page, and the job's progress: one commit."""
    session = ctx.session
    begin_write(session)
    for item_id in ids:
        audit.record(session, ctx.actor, "export", detail=f"job {ctx.job_id}",
                     pointer_id=item_id if field == "pointer_id" else None,
                     event_id=item_id if field == "event_id" else None)
    ctx.save(**progress)
    session.commit()


def _event_bodies(ctx: JobContext, page: list[MemoryEvent]
                  ) -> tuple[dict[uuid.UUID, str], dict[uuid.UUID, str]]:
    """The page's verified bodies, and the status of each event whose body failed."""
    try:
        return events.read_bodies(ctx.session, ctx.plane, ctx.tenant_id, page,
                                  actor=ctx.actor), {}
    except HashMismatch:
        pass  # one at a time, to tell which failed
    bodies: dict[uuid.UUID, str] = {}
    failed: dict[uuid.UUID, str] = {}
    for event in page:
        try:
            bodies.update(events.read_bodies(ctx.session, ctx.plane, ctx.tenant_id, [event],
                                             actor=ctx.actor))
        except HashMismatch as exc:
            failed[event.id] = "missing" if exc.extra.get("reason") == "missing" else "corrupt"
    return bodies, failed


def _describe_event(event: MemoryEvent) -> dict[str, Any]:
    return {
        "event_id": str(event.id), "scope": event.scope_type, "scope_ref": event.scope_ref,
        "kind": event.kind, "source": event.source, "source_ref": event.source_ref,
        "user_id": event.subject_user_id, "agent_id": event.agent_id,
        "occurred_at": _iso(event.occurred_at), "compressed_at": _iso(event.compressed_at),
        "created_at": _iso(event.created_at), "content_size": event.content_size,
        "content_sha256": event.content_sha256,
    }


def _add_item(archive: ZipWriter, read: export_items.Read, items_file: IO[bytes],
              counts: dict[str, int], not_exported: list[dict[str, str]]) -> None:
    item = _archived(archive, read)
    items_file.write((b"," if counts["pointers"] else b"") + _dumps(item))
    counts["pointers"] += 1
    counts["entries"] += item["item_type"] == "entry"
    counts[item["status"]] += 1
    if item["status"] == "exported":
        counts["bytes"] += item["content_size"]
    else:
        not_exported.append({"what": "memory value", "pointer_id": item["pointer_id"],
                             "why": _WHY[item["status"]]})


def _archived(archive: ZipWriter, read: export_items.Read) -> dict[str, Any]:
    """The manifest's item for one read, its value added to the archive when exported.

    Overwritten since the page was read, the verified read follows the memory to its new
    version: the item describes the version read (its hash, size, dates), not the one the
    page saw, so the manifest and the file stay one value. The file is the verified bytes
    as stored: their SHA-256 is the pointer's, checked by the read."""
    item: dict[str, Any] = {
        **_describe(read.pointer),
        "status": read.status, "file": None, "file_sha256": None, "hash_verified": False,
    }
    if read.member is not None:
        name = f"items/{read.pointer.id}.json"
        archive.add(name, read.member)
        item.update(file=name, file_sha256=read.pointer.content_sha256, hash_verified=True,
                    content_size=read.member.size)
    return item


def _describe(pointer: MemoryPointer) -> dict[str, Any]:
    """The manifest's description of one version of a memory."""
    return {
        "item_type": "entry" if pointer.key is None and pointer.memory_type == "entry"
        else "memory",
        "pointer_id": str(pointer.id), "scope": pointer.scope_type,
        "scope_ref": pointer.scope_ref, "key": pointer.key,
        "memory_type": pointer.memory_type, "title": pointer.title, "tags": pointer.tags,
        "importance": pointer.importance, "source": pointer.source,
        "user_id": pointer.subject_user_id, "agent_id": pointer.agent_id,
        "version": pointer.version, "created_at": _iso(pointer.created_at),
        "updated_at": _iso(pointer.updated_at), "expires_at": _iso(pointer.expires_at),
        "content_size": pointer.content_size, "content_sha256": pointer.content_sha256,
    }


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
