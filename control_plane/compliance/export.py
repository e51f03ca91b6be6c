"""Export of a data subject (GDPR Art. 15 access, Art. 20 portability).

The job walks every pointer of the subject — those whose ``subject_user_id`` is the user and
every pointer in the ``user`` scope with that ``scope_ref``; memories by key and curated
entries alike — reads each value verified (hash-checked, decrypted where encryption is on;
a window of values side by side, ``export_items``), then every raw event of the subject (same
selection on ``memory_events``) through ``events.service.read_bodies`` (hash-checked too),
and writes them into a ZIP (``zipwriter``: each member deflated, or stored when deflate
would not shrink it, its size and the archive's SHA-256 counted as it is written) that goes
to the tenant's own bucket at ``<prefix>/exports/<job id>/export.zip``.
The archive is built in a spooled temporary file (memory-bounded: small archives stay in
memory, large ones spill to disk), sealed under the data subject's key like every object
(envelope encryption, DESIGN §6 and §11: erasure's crypto-shredding covers every copy the
bucket keeps) and uploaded streamed (``put_file``: on S3, GCS and Azure a multipart,
resumable or block upload of 8 MiB parts, create-only, so the archive is never whole in
memory on any backend). The database keeps only counts, the archive's path, size and SHA-256
of the ZIP (I7), and when it expires.

``GET /v1/exports/{job_id}/download`` fetches the sealed archive in chunks (``iter_chunks``:
one streamed or several ranged requests, the backend's checksum of the whole checked at its
end) into a spooled file, decrypts it, checks the ZIP's SHA-256 against the job's record
and only then serves it; a mismatch (or a ciphertext that does not open) answers 409
``hash_mismatch`` and nothing is served. ``MEMPLANE_EXPORT_TTL_HOURS`` (72 by default) after
it was built, the job worker deletes the archive from the bucket (:func:`expire`, audited
as ``export_expire``); a download after that time answers 410.

Archive layout::

    manifest.json
    items/<pointer id>.json      each value exactly as stored (UTF-8 JSON)
    events/<event id>.json       each event body exactly as stored (a JSON string: Markdown)

``manifest.json`` (``"format": "memplane-export/1"``)::

    {
      "format": "memplane-export/1",
      "job_id": "<uuid>", "tenant_id": "<uuid>", "user_id": "<the subject>",
      "created_at": "<ISO-8601 UTC>",
      "selection": "<which pointers belong to the subject>",
      "counts": {"pointers": int, "exported": int, "missing": int, "corrupt": int,
                 "deleted_during_export": int, "bytes": int,
                 "entries": int,          # of the pointers, how many are curated entries
                 "events": int, "events_exported": int, "events_missing": int,
                 "events_corrupt": int},
      "items": [{
        "item_type",             # "entry" (a curated entry: key null, memory_type entry)
                                 # or "memory" (a memory by key)
        "pointer_id", "scope", "scope_ref", "key", "memory_type", "title", "tags",
        "importance", "source", "user_id", "agent_id", "version", "created_at",
        "updated_at", "expires_at", "content_size",
        "content_sha256",        # SHA-256 of the plaintext recorded by the control plane
        "status",                # exported | missing | corrupt | deleted_during_export
        "file",                  # "items/<pointer id>.json", or null when not exported
        "file_sha256",           # SHA-256 of the file in the archive, or null
        "hash_verified"          # file_sha256 == content_sha256
      }],
      "events": [{
        "event_id", "scope", "scope_ref", "kind", "source", "source_ref", "user_id",
        "agent_id", "occurred_at", "compressed_at", "created_at", "content_size",
        "content_sha256", "status",   # exported | missing | corrupt
        "file", "file_sha256", "hash_verified"
      }],
      "not_exported": [{"what": str, "why": str, "pointer_id"?: str}]
    }

Every pointer appears in ``items`` and every event in ``events``; one whose object is
missing or fails its hash is listed with that status (and again in ``not_exported``),
never silently dropped. A memory overwritten while the export runs is archived in the
version its window's read found, and its item describes that version (version, hash, size,
dates); one deleted before its window is read is listed ``deleted_during_export``.

Resuming: the archive is rebuilt from the start if a worker dies while building it (the
temporary file dies with the worker); once uploaded, ``progress`` records it and a rerun only
reports it.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import IO, Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters import envelope
from storage_adapters.bounded import ObjectTooLarge
from storage_adapters.envelope import DecryptionError

from ..audit import service as audit
from ..audit.service import Actor
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import Job, MemoryEvent, MemoryPointer
from ..errors import Conflict, DomainError, HashMismatch, NotFound
from ..events import repository as events_repo
from ..events import service as events
from ..jobs import repository as jobs_repo
from ..jobs.service import JobContext
from ..keys import subject_keys as keys
from ..memories import service as memories
from ..plane.data_plane import DataPlane, storage_errors
from . import export_items, subjects
from .zipwriter import Deflater, ZipWriter

FORMAT = "memplane-export/1"
ARCHIVE = "export.zip"
SPOOL_BYTES = 8 << 20
PAGE = 200
SELECTION = ("pointers (memories and entries) and raw events whose user_id is the subject, "
             "and every pointer and event in scope 'user' whose scope_ref is the subject")
_CHUNK = 1 << 20


class ExportExpired(DomainError):
    status_code = 410
    code = "export_expired"


def run(ctx: JobContext) -> dict[str, Any]:
    if "archive" in ctx.progress:
        return dict(ctx.progress["archive"])
    assert ctx.subject is not None
    session = ctx.session
    target = ctx.plane.active(session, ctx.tenant_id)
    path = target.path("exports", str(ctx.job_id), ARCHIVE)
    session.commit()
    with storage_errors():  # an attempt that died after its upload left this behind
        target.adapter.delete_many([path])
    started = utcnow()
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool, \
            tempfile.TemporaryFile() as items_file, tempfile.TemporaryFile() as events_file:
        counts, size, digest = _build(ctx, spool, items_file, events_file, started)
        ctx.checkpoint("before_upload")
        spool.seek(0)
        handle = _archive_key(ctx)
        session.commit()
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as sealed:
            if handle is None:  # encryption is switched off on this server
                stored: IO[bytes] = spool
            else:
                envelope.seal_stream(spool, sealed, size, key_id=handle.id,
                                     subject_key=handle.key,
                                     context=_context(ctx.tenant_id, path, ctx.job_id))
                sealed.seek(0)
                stored = sealed
            with storage_errors():
                storage.put_file(target.adapter, path, stored)  # type: ignore[arg-type]
    expires_at = utcnow() + timedelta(hours=ctx.settings.export_ttl_hours)
    result = {"archive_path": path, "storage_config_id": str(target.config_id),
              "size": size, "sha256": digest, "encrypted": handle is not None,
              "expires_at": expires_at.isoformat(), "counts": counts}
    begin_write(session)
    audit.record(session, ctx.actor, "export",
                 detail=f"job {ctx.job_id}: archive of {counts['pointers']} pointers, "
                        f"{counts['exported']} exported, {counts['events']} events, "
                        f"{counts['events_exported']} exported, {size} bytes, sha256 {digest}, "
                        f"{'sealed' if handle is not None else 'not encrypted'}, "
                        f"expires {expires_at.isoformat()}")
    ctx.save(archive=result)
    session.execute(update(Job).where(Job.id == ctx.job_id).values(expires_at=expires_at))
    session.commit()
    return result


def _archive_key(ctx: JobContext) -> keys.SubjectKeyHandle | None:
    """The data subject's own key (created if they have none yet): the archive holds their
    data, so destroying that key at erasure makes every copy of it unreadable."""
    ring = ctx.plane.keys
    if ring is None or not ring.enabled:
        return None
    assert ctx.subject is not None
    return keys.key_for_write(ctx.session, ring, ctx.tenant_id, (keys.USER, ctx.subject))


def _context(tenant_id: uuid.UUID, path: str, job_id: uuid.UUID) -> bytes:
    """The archive is bound to its tenant, its path and its job: moved, it does not open."""
    return envelope.associated_data(tenant_id, path, str(job_id), None)


def _build(ctx: JobContext, spool: IO[bytes], items_file: IO[bytes], events_file: IO[bytes],
           started: datetime) -> tuple[dict[str, int], int, str]:
    """The archive written to ``spool``: its counts, size and SHA-256."""
    session = ctx.session
    assert ctx.subject is not None
    counts = {"pointers": 0, "exported": 0, "missing": 0, "corrupt": 0,
              "deleted_during_export": 0, "bytes": 0, "entries": 0, "events": 0,
              "events_exported": 0, "events_missing": 0, "events_corrupt": 0}
    not_exported: list[dict[str, str]] = []
    archive = ZipWriter(spool, started)
    reader = export_items.Reader(session, ctx.plane, ctx.actor)
    after: uuid.UUID | None = None
    while True:
        page = list(subjects.pointer_page(session, ctx.tenant_id, ctx.subject, after, PAGE))
        session.commit()
        if not page:
            break
        previous: export_items.Started | None = None
        for window in [*export_items.windows(page), None]:
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
    head = {"format": FORMAT, "job_id": str(ctx.job_id), "tenant_id": str(ctx.tenant_id),
            "user_id": ctx.subject, "created_at": started.isoformat(), "selection": SELECTION,
            "counts": counts, "not_exported": not_exported}
    with tempfile.TemporaryFile() as packed:
        manifest = Deflater(packed)
        text = json.dumps(head, ensure_ascii=False, indent=None)
        manifest.write(text[:-1].encode() + b',"items":[')
        items_file.seek(0)
        while chunk := items_file.read(_CHUNK):
            manifest.write(chunk)
        manifest.write(b'],"events":[')
        events_file.seek(0)
        while chunk := events_file.read(_CHUNK):
            manifest.write(chunk)
        manifest.write(b"]}")
        crc, size, compressed = manifest.finish()
        packed.seek(0)
        archive.add_packed_file("manifest.json", packed, crc, size, compressed)
    size, digest = archive.close()
    return counts, size, digest


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
                data = memories.serialise(bodies[event.id])
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


def _measure(spool: IO[bytes]) -> tuple[int, str]:
    spool.seek(0)
    digest, size = hashlib.sha256(), 0
    while chunk := spool.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    spool.seek(0)
    return size, digest.hexdigest()


def download(session: Session, plane: DataPlane, actor: Actor, job_id: uuid.UUID,
             now: datetime | None = None) -> tuple[Iterator[bytes], int]:
    """The finished export's ZIP as a stream of chunks, and its size (audited).

    The archive is fetched, decrypted and hash-checked into a spooled file before the first
    byte is served: a mismatch raises ``HashMismatch`` (409) and serves nothing. After the
    archive's expiry the answer is ``ExportExpired`` (410), whether or not the worker has
    deleted it yet.
    """
    with audit.audited(session, actor, "export_download", detail=f"job {job_id}"):
        job = jobs_repo.get(session, actor.tenant_id, job_id)
        if job is None or job.kind != "export":
            raise NotFound(f"no export job {job_id}")
        if job.state != "completed" or not job.result:
            raise Conflict(f"export job {job_id} is {job.state}; download it once it has "
                           "completed (GET /v1/jobs/{id} shows its state)", state=job.state)
        result = dict(job.result)
        expires_at = _expiry(result) or job.expires_at  # the column: archives from before 0006
        if expires_at is not None and (result.get("expired_at")
                                       or expires_at <= (now or utcnow())):
            raise ExportExpired(
                f"this export expired at {expires_at.isoformat()} and its archive was deleted "
                "from the bucket; start a new one (POST /v1/subjects/{user_id}/export)",
                expired_at=expires_at.isoformat())
        target = plane.by_id(session, uuid.UUID(result["storage_config_id"]))
        session.rollback()
        plain = _open_archive(session, plane, actor.tenant_id, target, job_id, result)
        begin_write(session)
        audit.record(session, actor, "export_download",
                     detail=f"job {job_id}: {result['size']} bytes, sha256 verified")
        session.commit()
        return _stream(plain), int(result["size"])


def _archive_bound(result: dict[str, Any]) -> int:
    """The most the archive may take from the bucket: its recorded size, sealed."""
    size = int(result["size"])
    return envelope.sealed_size(size) if result.get("encrypted") else size


def _expiry(result: dict[str, Any]) -> datetime | None:
    value = result.get("expires_at")
    return datetime.fromisoformat(value) if value else None


def _open_archive(session: Session, plane: DataPlane, tenant_id: uuid.UUID, target: Any,
                  job_id: uuid.UUID, result: dict[str, Any]) -> IO[bytes]:
    """The archive's ZIP in a spooled file, decrypted and checked against the job's SHA-256."""
    path = result["archive_path"]
    raw: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
    plain: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
    problem = None
    try:
        try:
            with storage_errors():
                try:
                    for chunk in storage.iter_object(target.adapter, path, _CHUNK,
                                                     _archive_bound(result)):
                        raw.write(chunk)
                except ObjectTooLarge:  # not this job's archive: refused below, unserved
                    problem = "the archive in the bucket is larger than the one built"
        except storage.ObjectNotFound:
            raise NotFound(f"the archive of export job {job_id} is no longer in the bucket "
                           "(it was erased or removed); start a new export") from None
        raw.seek(0)
        try:
            if problem is None:
                open_archive(session, plane, tenant_id, path, job_id, raw, plain,
                             sealed=bool(result.get("encrypted")))
        except DecryptionError as exc:
            problem = str(exc)
        finally:
            session.rollback()
        size, digest = _measure(plain)
        if problem is not None or digest != result["sha256"] or size != int(result["size"]):
            why = problem or "the archive in the bucket does not match the SHA-256 recorded " \
                             "when it was built"
            raise HashMismatch(f"export job {job_id}: {why}; nothing was served, start a new "
                               "export", job_id=str(job_id), expected_sha256=result["sha256"],
                               actual_sha256=None if problem else digest)
    except BaseException:
        plain.close()
        raise
    finally:
        raw.close()
    return plain


def open_archive(session: Session, plane: DataPlane, tenant_id: uuid.UUID, path: str,
                 job_id: uuid.UUID, src: IO[bytes], dst: IO[bytes], *, sealed: bool) -> None:
    """Decrypt a stored archive read from ``src`` into ``dst``; ``DecryptionError`` if it does
    not open (tampered, moved, or its subject's key destroyed by an erasure). An archive
    built before exports were sealed (``sealed`` false and no envelope) is copied as is."""
    head = src.read(envelope.HEADER_BYTES)
    if not envelope.is_envelope(head):
        if sealed:
            raise DecryptionError("the archive is not encrypted, but it was sealed when it "
                                  "was built (replaced outside memplane?)")
        dst.write(head)
        while chunk := src.read(_CHUNK):
            dst.write(chunk)
        return
    header = envelope.read_header(head)
    ring = plane.keys
    if ring is None:
        raise RuntimeError("the data plane has no keyring; build it through Runtime")
    key = keys.key_to_open(session, ring, tenant_id, header.key_id)
    envelope.open_stream(src, dst, header=header, subject_key=key,
                         context=_context(tenant_id, path, job_id))


def _stream(file: IO[bytes]) -> Iterator[bytes]:
    try:
        while chunk := file.read(_CHUNK):
            yield chunk
    finally:
        file.close()


def expire(session: Session, plane: DataPlane, job_id: uuid.UUID, now: datetime) -> bool:
    """Delete an expired export's archive from its bucket, audit it (``export_expire``) and
    record it on the job (``result.expired_at``); False if another worker already did."""
    job = session.get(Job, job_id, populate_existing=True)
    if job is None or job.expires_at is None:
        session.rollback()
        return False
    result = dict(job.result or {})
    tenant_id = job.tenant_id
    actor = Actor(tenant_id, "system", "export-expiry")
    note = "archive deleted from the bucket"
    path, config_id = result.get("archive_path"), result.get("storage_config_id")
    target = None
    if path and config_id:
        try:
            target = plane.by_id(session, uuid.UUID(config_id))
        except NotFound:
            note = "its storage configuration no longer exists; nothing to delete"
    session.rollback()
    if target is not None and path:
        with storage_errors():  # deleting what is already gone succeeds
            target.delete([path])
    begin_write(session)
    locked = session.get(Job, job_id, populate_existing=True, with_for_update=True)
    if locked is None or locked.expires_at is None:
        session.rollback()
        return False
    locked.result = {"expires_at": locked.expires_at.isoformat(), **(locked.result or {}),
                     "expired_at": now.isoformat()}
    locked.expires_at = None
    locked.updated_at = now
    audit.record(session, actor, "export_expire",
                 detail=f"export job {job_id} expired at {result.get('expires_at')}: {note}")
    session.commit()
    return True
