"""How an export writes its bundle: a ZIP (``zipwriter``: each member deflated, or stored
when deflate would not shrink it, its size and the archive's SHA-256 counted as it is
written) of what ``export_collect`` gathers and the manifest, built in a spooled temporary
file (memory-bounded: small archives stay in memory, large ones spill to disk), sealed under
the data subject's key like every object (envelope encryption, DESIGN §6 and §11: erasure's
crypto-shredding covers every copy the bucket keeps) while it is uploaded streamed
(``export_upload``: sealing and upload side by side; ``put_file``: on
S3, GCS and Azure a multipart, resumable or block upload of 8 MiB parts, create-only, so the
archive is never whole in memory on any backend)."""

from __future__ import annotations

import json
import tempfile
import uuid
from datetime import datetime
from typing import IO

from storage_adapters import base as storage
from storage_adapters import envelope

from ..jobs.service import JobContext
from ..keys import subject_keys as keys
from ..plane.data_plane import Target, storage_errors
from . import proofs
from .export_collect import SELECTION, collect
from .export_upload import seal_and_put
from .zipwriter import Deflater, ZipWriter

FORMAT = "memplane-export/1"
SPOOL_BYTES = 8 << 20
CHUNK = 1 << 20


def write_archive(ctx: JobContext, target: Target, path: str,
                  started: datetime) -> tuple[dict[str, int], int, str, bool]:
    """Build the subject's archive, seal it and put it at ``path``: its counts, its size and
    SHA-256 (of the ZIP), and whether it was sealed."""
    session = ctx.session
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool, \
            tempfile.TemporaryFile() as items_file, tempfile.TemporaryFile() as events_file:
        counts, size, digest = _build(ctx, spool, items_file, events_file, started)
        ctx.checkpoint("before_upload")
        spool.seek(0)
        handle = _archive_key(ctx)
        session.commit()
        with storage_errors():
            if handle is None:  # encryption is switched off on this server
                storage.put_file(target.adapter, path, spool)  # type: ignore[arg-type]
            else:
                seal_and_put(target.adapter, path, spool, size, key_id=handle.id,
                             subject_key=handle.key,
                             context=archive_context(ctx.tenant_id, path, ctx.job_id))
    return counts, size, digest, handle is not None


def _archive_key(ctx: JobContext) -> keys.SubjectKeyHandle | None:
    """The data subject's own key (created if they have none yet): the archive holds their
    data, so destroying that key at erasure makes every copy of it unreadable."""
    ring = ctx.plane.keys
    if ring is None or not ring.enabled:
        return None
    assert ctx.subject is not None
    return keys.key_for_write(ctx.session, ring, ctx.tenant_id, (keys.USER, ctx.subject))


def archive_context(tenant_id: uuid.UUID, path: str, job_id: uuid.UUID) -> bytes:
    """The archive is bound to its tenant, its path and its job: moved, it does not open."""
    return envelope.associated_data(tenant_id, path, str(job_id), None)


def _build(ctx: JobContext, spool: IO[bytes], items_file: IO[bytes], events_file: IO[bytes],
           started: datetime) -> tuple[dict[str, int], int, str]:
    """The archive written to ``spool``: its counts, size and SHA-256."""
    archive = ZipWriter(spool, started)
    counts, not_exported = collect(ctx, archive, items_file, events_file)
    transparency = proofs.record_and_prove(
        ctx, "export", f"job {ctx.job_id}: manifest of {counts['pointers']} pointers and "
                       f"{counts['events']} events written")
    head = {"format": FORMAT, "job_id": str(ctx.job_id), "tenant_id": str(ctx.tenant_id),
            "user_id": ctx.subject, "created_at": started.isoformat(), "selection": SELECTION,
            "counts": counts, "not_exported": not_exported, "transparency": transparency}
    with tempfile.TemporaryFile() as packed:
        manifest = Deflater(packed)
        text = json.dumps(head, ensure_ascii=False, indent=None)
        manifest.write(text[:-1].encode() + b',"items":[')
        items_file.seek(0)
        while chunk := items_file.read(CHUNK):
            manifest.write(chunk)
        manifest.write(b'],"events":[')
        events_file.seek(0)
        while chunk := events_file.read(CHUNK):
            manifest.write(chunk)
        manifest.write(b"]}")
        crc, size, compressed = manifest.finish()
        packed.seek(0)
        archive.add_packed_file("manifest.json", packed, crc, size, compressed)
    size, digest = archive.close()
    return counts, size, digest
