"""Export of a data subject (GDPR Art. 15 access, Art. 20 portability).

The job collects every pointer and raw event of the subject (``export_collect``: values and
bodies read verified), writes them into a ZIP with their manifest, seals it under the data
subject's key and uploads it streamed (``export_bundle``) to the tenant's own bucket at
``<prefix>/exports/<job id>/export.zip``. The database keeps only counts, the archive's
path, size and SHA-256 of the ZIP (I7), and when it expires.

``GET /v1/exports/{job_id}/download`` serves it once decrypted and checked against the job's
record (``export_download``). ``MEMPLANE_EXPORT_TTL_HOURS`` (72 by default) after it was
built, the job worker deletes the archive from the bucket (:func:`expire`, audited as
``export_expire``); a download after that time answers 410.

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
      "not_exported": [{"what": str, "why": str, "pointer_id"?: str}],
      "transparency": {"checkpoint": str, "proofs": [{"seq", "leaf", "hashes"}]}
                                 # the job's manifest row, proven in the tenant's audit log
                                 # (compliance/proofs.py)
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

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from ..audit import service as audit
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import Job
from ..errors import NotFound
from ..identity import Actor
from ..jobs.service import JobContext
from ..plane.data_plane import DataPlane, storage_errors
from .export_bundle import write_archive

ARCHIVE = "export.zip"


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
    counts, size, digest, encrypted = write_archive(ctx, target, path, started)
    expires_at = utcnow() + timedelta(hours=ctx.settings.export_ttl_hours)
    result = {"archive_path": path, "storage_config_id": str(target.config_id),
              "size": size, "sha256": digest, "encrypted": encrypted,
              "expires_at": expires_at.isoformat(), "counts": counts}
    begin_write(session)
    audit.record(session, ctx.actor, "export",
                 detail=f"job {ctx.job_id}: archive of {counts['pointers']} pointers, "
                        f"{counts['exported']} exported, {counts['events']} events, "
                        f"{counts['events_exported']} exported, {size} bytes, sha256 {digest}, "
                        f"{'sealed' if encrypted else 'not encrypted'}, "
                        f"expires {expires_at.isoformat()}")
    ctx.save(archive=result)
    session.execute(update(Job).where(Job.id == ctx.job_id).values(expires_at=expires_at))
    session.commit()
    return result


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
