"""Export of a data subject (GDPR Art. 15 access, Art. 20 portability).

The job walks every pointer of the subject — those whose ``subject_user_id`` is the user and
every pointer in the ``user`` scope with that ``scope_ref`` — reads each value through the
memory service's verified read (hash-checked, decrypted where encryption is on), and streams
them into a ZIP that goes to the tenant's own bucket at ``<prefix>/exports/<job id>/export.zip``.
The archive is built in a spooled temporary file (memory-bounded: small archives stay in
memory, large ones spill to disk) and uploaded in one streamed put; the ZIP is downloaded
through ``GET /v1/exports/{job_id}/download``. The database keeps only counts, the archive's
path, size and SHA-256 (I7).

Archive layout::

    manifest.json
    items/<pointer id>.json      each value exactly as stored (UTF-8 JSON)

``manifest.json`` (``"format": "memplane-export/1"``)::

    {
      "format": "memplane-export/1",
      "job_id": "<uuid>", "tenant_id": "<uuid>", "user_id": "<the subject>",
      "created_at": "<ISO-8601 UTC>",
      "selection": "<which pointers belong to the subject>",
      "counts": {"pointers": int, "exported": int, "missing": int, "corrupt": int,
                 "deleted_during_export": int, "bytes": int},
      "items": [{
        "pointer_id", "scope", "scope_ref", "key", "memory_type", "title", "tags",
        "importance", "source", "user_id", "agent_id", "version", "created_at",
        "updated_at", "expires_at", "content_size",
        "content_sha256",        # SHA-256 of the plaintext recorded by the control plane
        "status",                # exported | missing | corrupt | deleted_during_export
        "file",                  # "items/<pointer id>.json", or null when not exported
        "file_sha256",           # SHA-256 of the file in the archive, or null
        "hash_verified"          # file_sha256 == content_sha256
      }],
      "not_exported": [{"what": str, "why": str, "pointer_id"?: str}]
    }

Every pointer appears in ``items``; one whose object is missing or fails its hash is listed
with that status (and again in ``not_exported``), never silently dropped.

Resuming: the archive is rebuilt from the start if a worker dies while building it (the
temporary file dies with the worker); once uploaded, ``progress`` records it and a rerun only
reports it.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import uuid
import zipfile
from collections.abc import Iterator
from typing import IO, Any

from sqlalchemy.orm import Session

from storage_adapters import base as storage

from ..audit import service as audit
from ..audit.service import Actor
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import MemoryPointer
from ..errors import Conflict, HashMismatch, NotFound
from ..jobs import repository as jobs_repo
from ..jobs.service import JobContext
from ..memories import service as memories
from ..storage_config.plane import DataPlane, storage_errors
from . import subjects

FORMAT = "memplane-export/1"
ARCHIVE = "export.zip"
SPOOL_BYTES = 8 << 20
PAGE = 200
SELECTION = ("pointers whose user_id is the subject, and every pointer in scope 'user' "
             "whose scope_ref is the subject")
_CHUNK = 1 << 20


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
            tempfile.TemporaryFile() as items_file:
        counts = _build(ctx, spool, items_file, started.isoformat())
        ctx.checkpoint("before_upload")
        size, digest = _measure(spool)
        with storage_errors():
            storage.put_file(target.adapter, path, spool)  # type: ignore[arg-type]
    result = {"archive_path": path, "storage_config_id": str(target.config_id),
              "size": size, "sha256": digest, "counts": counts}
    begin_write(session)
    audit.record(session, ctx.actor, "export",
                 detail=f"job {ctx.job_id}: archive of {counts['pointers']} pointers, "
                        f"{counts['exported']} exported, {size} bytes, sha256 {digest}")
    ctx.save(archive=result)
    session.commit()
    return result


def _build(ctx: JobContext, spool: IO[bytes], items_file: IO[bytes],
           created_at: str) -> dict[str, int]:
    session = ctx.session
    assert ctx.subject is not None
    counts = {"pointers": 0, "exported": 0, "missing": 0, "corrupt": 0,
              "deleted_during_export": 0, "bytes": 0}
    not_exported: list[dict[str, str]] = []
    # Level 1: most of deflate's size saving on JSON text at several times level 6's speed.
    with zipfile.ZipFile(spool, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1,
                         allowZip64=True) as archive:
        after: uuid.UUID | None = None
        first = True
        while True:
            page = list(subjects.pointer_page(session, ctx.tenant_id, ctx.subject, after, PAGE))
            session.commit()
            if not page:
                break
            for pointer in page:
                item = _export_one(session, ctx.plane, ctx.actor, archive, pointer)
                counts["pointers"] += 1
                counts[item["status"]] += 1
                if item["status"] == "exported":
                    counts["bytes"] += item["content_size"]
                else:
                    not_exported.append({"what": "memory value", "pointer_id": item["pointer_id"],
                                         "why": _WHY[item["status"]]})
                items_file.write((b"" if first else b",") + _dumps(item))
                first = False
            begin_write(session)
            for pointer in page:
                audit.record(session, ctx.actor, "export", pointer_id=pointer.id,
                             detail=f"job {ctx.job_id}")
            ctx.save(exported_pointers=counts["pointers"])
            session.commit()
            after = page[-1].id
        not_exported.append({"what": "raw events and curated entries",
                             "why": "this deployment has no event log; nothing to export"})
        not_exported.append({"what": "embeddings",
                             "why": "derived vectors, recomputable from the exported values"})
        not_exported.append({"what": "access audit rows",
                             "why": "records about access, not the subject's memories; "
                                    "available to the controller through GET /v1/audit"})
        head = {"format": FORMAT, "job_id": str(ctx.job_id), "tenant_id": str(ctx.tenant_id),
                "user_id": ctx.subject, "created_at": created_at, "selection": SELECTION,
                "counts": counts, "not_exported": not_exported}
        with archive.open("manifest.json", "w", force_zip64=True) as manifest:
            text = json.dumps(head, ensure_ascii=False, indent=None)
            manifest.write(text[:-1].encode() + b',"items":[')
            items_file.seek(0)
            while chunk := items_file.read(_CHUNK):
                manifest.write(chunk)
            manifest.write(b"]}")
    return counts


_WHY = {
    "missing": "the object is missing from the bucket; the pointer is marked corrupt",
    "corrupt": "the object does not match its recorded SHA-256; the pointer is marked corrupt",
    "deleted_during_export": "the memory was deleted while the export ran",
}


def _export_one(session: Session, plane: DataPlane, actor: Actor, archive: zipfile.ZipFile,
                pointer: MemoryPointer) -> dict[str, Any]:
    item: dict[str, Any] = {
        "pointer_id": str(pointer.id), "scope": pointer.scope_type,
        "scope_ref": pointer.scope_ref, "key": pointer.key,
        "memory_type": pointer.memory_type, "title": pointer.title, "tags": pointer.tags,
        "importance": pointer.importance, "source": pointer.source,
        "user_id": pointer.subject_user_id, "agent_id": pointer.agent_id,
        "version": pointer.version, "created_at": _iso(pointer.created_at),
        "updated_at": _iso(pointer.updated_at), "expires_at": _iso(pointer.expires_at),
        "content_size": pointer.content_size, "content_sha256": pointer.content_sha256,
        "status": "exported", "file": None, "file_sha256": None, "hash_verified": False,
    }
    if pointer.sync_status in ("pending_delete", "pending_write"):
        item["status"] = "deleted_during_export"
        return item
    try:
        value = memories.read_pointer(session, plane, actor, pointer).value
    except HashMismatch as exc:
        item["status"] = "missing" if exc.extra.get("actual_sha256") is None else "corrupt"
        return item
    except NotFound:
        item["status"] = "deleted_during_export"
        return item
    data = memories.serialise(value)
    name = f"items/{pointer.id}.json"
    archive.writestr(name, data)
    digest = hashlib.sha256(data).hexdigest()
    item.update(file=name, file_sha256=digest, hash_verified=digest == pointer.content_sha256,
                content_size=len(data))
    return item


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


def download(session: Session, plane: DataPlane, actor: Actor,
             job_id: uuid.UUID) -> tuple[Iterator[bytes], int]:
    """The finished export's ZIP as a stream of chunks, and its size (audited)."""
    with audit.audited(session, actor, "export_download", detail=f"job {job_id}"):
        job = jobs_repo.get(session, actor.tenant_id, job_id)
        if job is None or job.kind != "export":
            raise NotFound(f"no export job {job_id}")
        if job.state != "completed" or not job.result:
            raise Conflict(f"export job {job_id} is {job.state}; download it once it has "
                           "completed (GET /v1/jobs/{id} shows its state)", state=job.state)
        result = job.result
        target = plane.by_id(session, uuid.UUID(result["storage_config_id"]))
        session.rollback()
        try:
            with storage_errors():
                target.adapter.head(result["archive_path"])
        except storage.ObjectNotFound:
            raise NotFound(f"the archive of export job {job_id} is no longer in the bucket "
                           "(it was erased or removed); start a new export") from None
        begin_write(session)
        audit.record(session, actor, "export_download",
                     detail=f"job {job_id}: {result['size']} bytes")
        session.commit()
        return storage.iter_object(target.adapter, result["archive_path"]), int(result["size"])
