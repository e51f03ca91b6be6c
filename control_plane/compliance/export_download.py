"""Downloading a finished export (``GET /v1/exports/{job_id}/download``).

The sealed archive is fetched in chunks (``iter_chunks``: one streamed or several ranged
requests, the backend's checksum of the whole checked at its end) into a spooled file,
decrypted, and its ZIP's SHA-256 checked against the job's record; only then is it served.
A mismatch (or a ciphertext that does not open) answers 409 ``hash_mismatch`` and nothing is
served. After the archive's expiry (``export.expire``) a download answers 410.
"""

from __future__ import annotations

import hashlib
import tempfile
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import IO, Any

from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters import envelope
from storage_adapters.bounded import ObjectTooLarge
from storage_adapters.envelope import DecryptionError

from ..audit import service as audit
from ..db.base import utcnow
from ..db.engine import begin_write
from ..errors import Conflict, DomainError, HashMismatch, NotFound
from ..identity import Actor
from ..jobs import repository as jobs_repo
from ..keys import subject_keys as keys
from ..plane.data_plane import DataPlane, storage_errors
from .export_bundle import CHUNK, SPOOL_BYTES, archive_context


class ExportExpired(DomainError):
    status_code = 410
    code = "export_expired"


def _measure(spool: IO[bytes]) -> tuple[int, str]:
    spool.seek(0)
    digest, size = hashlib.sha256(), 0
    while chunk := spool.read(CHUNK):
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
                    for chunk in storage.iter_object(target.adapter, path, CHUNK,
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
        while chunk := src.read(CHUNK):
            dst.write(chunk)
        return
    header = envelope.read_header(head)
    ring = plane.keys
    if ring is None:
        raise RuntimeError("the data plane has no keyring; build it through Runtime")
    key = keys.key_to_open(session, ring, tenant_id, header.key_id)
    envelope.open_stream(src, dst, header=header, subject_key=key,
                         context=archive_context(tenant_id, path, job_id))


def _stream(file: IO[bytes]) -> Iterator[bytes]:
    try:
        while chunk := file.read(CHUNK):
            yield chunk
    finally:
        file.close()

