"""Signed erasure receipts: what an erasure did, how it was checked, and what may remain.

A receipt is a JSON object (schema ``memplane-erasure-receipt/1``)::

    {
      "format": "memplane-erasure-receipt/1",
      "id", "job_id", "tenant_id",
      "subject": {"hash": hex, "salt": hex, "algorithm": "sha256(salt || utf8(user_id))"},
      "started_at", "finished_at",                      # ISO-8601 UTC
      "work_done": bool,                                # false: nothing of the subject was found
      "counts": {"pointers", "memories", "entries", "compactor_entries", "events",
                 "objects", "object_versions", "orphans_swept", "exports", "keys",
                 "search_scopes_rewritten", "compactor_events_released"},
                                                        # integers; pointers = memories +
                                                        # entries (the subject's own)
      "layers": {<layer>: {"deleted"/"destroyed": int, "verified_by": str, ...}},
      "retention": [{"location", "backend", "bucket", "versioning", "soft_delete_days",
                     "object_lock", "retention_days", "retained_until", "statement"}],
      "buckets": [{"storage_config_id": "sc_…", "name", "storage_type", "bucket",
                   "prefix", "region", "is_default"}],    # every bucket the erasure walked
                                                        # (no credentials)
      "limits": [str],                                  # what the receipt cannot prove
      "audit": {"first_seq": int, "last_seq": int,      # the audit chain rows of the erasure
                "head_seq": int, "head_hash": hex},     # the chain's head when it was signed
      "transparency": {"checkpoint": str,               # rows first_seq and last_seq proven
                       "proofs": [{"seq", "leaf", "hashes"}]},  # in the log (proofs.py)
      "key_id": str,                                    # which signing key
      "signature": base64                               # Ed25519 over the canonical form
    }

The subject appears only as a salted hash: whoever holds the user id and the receipt can
recompute it; the receipt alone does not reveal who was erased. The salt is derived from the
server key and the job id (``pseudonyms.receipt_salt``): the stored receipt leaves it out and
serving the receipt puts it back, so the database alone cannot test a guessed id against the
hash. (Receipts signed before that change keep the random salt they were issued with.)
Numbers of days are given as strings (``"7"``, ``"0.5"``) so the signed form has no floats;
see ``control_plane/signing.py`` for the canonical form.

``audit.head_hash`` ties the receipt to the audit chain: it is the ``row_hash`` of row
``head_seq``, which commits to every row before it, the erasure's own included. The sealer's
signed checkpoints in the tenant's bucket commit to the same chain, so a database rewritten
after the receipt no longer has that hash at that row.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage_adapters.base import BucketDescription

from ..audit import service as audit
from ..db.engine import begin_write
from ..db.models import AccessLog, AuditHead, ErasureReceipt, StorageConfig
from ..errors import NotFound
from ..identity import Actor
from ..keys import pseudonyms
from ..plane.credentials import CredentialBox
from ..plane.data_plane import public_id
from ..settings import Settings
from ..signing import signing_key

FORMAT = "memplane-erasure-receipt/1"

LIMITS = [
    "backups, snapshots and replicas of the bucket or the database made outside memplane are "
    "not visible to it and are not covered",
    "copies a bucket keeps after deletion (soft delete, object lock, retention) are listed "
    "under retention with the date they disappear, where the bucket reports it",
    "the access audit log is append-only and keeps rows about the subject's memories "
    "(ids, operations, times; no content)",
]


def build(session: Session, *, receipt_id: uuid.UUID, job_id: uuid.UUID,
          tenant_id: uuid.UUID, user_id: str, progress: dict[str, Any],
          counts: dict[str, int], descriptions: list[tuple[uuid.UUID, BucketDescription]],
          work_done: bool, credentials: CredentialBox | None) -> dict[str, Any]:
    salt = pseudonyms.receipt_salt(credentials, tenant_id, job_id)
    finished = datetime.fromisoformat(progress["finished_at"])
    first_seq, last_seq = _seqs(session, progress["start_audit_id"], progress["end_audit_id"])
    head_seq, head_hash = session.execute(
        select(AuditHead.last_seq, AuditHead.last_hash)
        .where(AuditHead.tenant_id == tenant_id)).one()
    keys = dict(progress["keys"])
    verification = progress.get("verification", {})
    entries = int(counts.get("entries", 0))
    compactor_entries = int(counts.get("compactor_entries", 0))
    events = int(counts.get("events", 0))
    rewritten = int(counts.get("search_scopes_rewritten", 0))
    released = int(counts.get("compactor_events_released", 0))
    return {
        "format": FORMAT,
        "id": str(receipt_id),
        "job_id": str(job_id),
        "tenant_id": str(tenant_id),
        "subject": {"hash": pseudonyms.salted_hash(salt, user_id), "salt": salt,
                    "algorithm": "sha256(salt || utf8(user_id))"},
        "started_at": progress["started_at"],
        "finished_at": progress["finished_at"],
        "work_done": work_done,
        "counts": {
            "pointers": counts["pointers"], "memories": counts["pointers"] - entries,
            "entries": entries, "compactor_entries": compactor_entries, "events": events,
            "objects": counts["objects"],
            "object_versions": counts["versions"], "orphans_swept": counts["orphans"],
            "exports": counts["exports"], "keys": int(keys.get("destroyed", 0)),
            "search_scopes_rewritten": rewritten, "compactor_events_released": released,
        },
        "layers": {
            "pointers": {
                "deleted": counts["pointers"],
                "verified_by": "count query over the tenant's pointers whose user_id is the "
                               "subject or whose scope is user/<subject>: "
                               f"{verification.get('pointers_remaining', 0)} remaining",
            },
            "memories": {"deleted": counts["pointers"] - entries,
                         "verified_by": "the pointer count query above"},
            "entries": {"deleted": entries, "verified_by": "the pointer count query above "
                        "(entries are pointers without a key, memory type entry)"},
            "compactor_entries": {
                "deleted": compactor_entries,
                "verified_by": "count query over the tenant's compactor entries whose "
                               "provenance (compaction_events) names an event of the subject "
                               "or an event that no longer exists: "
                               f"{verification.get('compactor_entries_remaining', 0)} "
                               "remaining; their objects checked gone by listing their "
                               "directories",
                "other_subjects_events_released": released,
            },
            "search_segments": {
                "scopes_rewritten": rewritten,
                "verified_by": "every segment of each scope that indexed a deleted memory or "
                               "entry replaced by one built from the live memories only; "
                               "rows about the subject were sealed under the subject's key "
                               "(destroyed below), so no copy of an older segment opens them",
            },
            "events": {
                "deleted": events,
                "verified_by": "count query over the tenant's events whose user_id is the "
                               "subject or whose scope is user/<subject>: "
                               f"{verification.get('events_remaining', 0)} remaining; their "
                               "bodies checked gone by listing each month directory that held "
                               f"one ({progress.get('events_checked', 0)} bodies) and every "
                               "version under events/user/<subject>/",
            },
            "objects": {
                "deleted": counts["objects"], "orphans_swept": counts["orphans"],
                "exports_deleted": counts["exports"],
                "verified_by": "listing every version under memories/user/<subject>/ and "
                               "events/user/<subject>/ in each "
                               f"of {verification.get('locations_listed', 0)} bucket "
                               "location(s): "
                               f"{verification.get('objects_remaining', 0)} remaining; objects "
                               "outside that prefix verified by listing their scope "
                               f"directories after deletion ({progress.get('outside_checked', 0)}"
                               " objects)",
            },
            "object_versions": {
                "purged": counts["versions"],
                "verified_by": "version listing (list_versions) of the same prefixes; on "
                               "buckets without versioning the current objects only",
            },
            "keys": keys,
        },
        "retention": [_retention(config_id, d, finished) for config_id, d in descriptions],
        "buckets": _buckets(session, tenant_id, [config_id for config_id, _ in descriptions]),
        "limits": LIMITS,
        "audit": {"first_seq": first_seq, "last_seq": last_seq,
                  "head_seq": int(head_seq), "head_hash": head_hash},
        "key_id": "",
    }


def _buckets(session: Session, tenant_id: uuid.UUID,
             config_ids: list[uuid.UUID]) -> list[dict[str, Any]]:
    """Each storage configuration the erasure walked, as the tenant knows it (no secrets)."""
    rows = {row.id: row for row in session.scalars(select(StorageConfig).where(
        StorageConfig.tenant_id == tenant_id, StorageConfig.id.in_(config_ids)))}
    return [{"storage_config_id": public_id(row.id), "name": row.name,
             "storage_type": row.storage_type, "bucket": row.bucket, "prefix": row.prefix,
             "region": row.region, "is_default": bool(row.is_active)}
            for row in (rows[config_id] for config_id in config_ids if config_id in rows)]


def _seqs(session: Session, first_id: int, last_id: int) -> tuple[int, int]:
    rows = {row_id: seq for row_id, seq in session.execute(
        select(AccessLog.id, AccessLog.seq).where(AccessLog.id.in_((first_id, last_id))))}
    first, last = rows.get(first_id), rows.get(last_id)
    if first is None or last is None:
        raise RuntimeError("the erasure's audit rows are not sealed yet")
    return int(first), int(last)


def _days(value: float | None) -> str | None:
    if value is None:
        return None
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _retention(config_id: uuid.UUID, d: BucketDescription,
               finished: datetime) -> dict[str, Any]:
    longest = max(d.soft_delete_days or 0, d.retention_days or 0)
    until = (finished + timedelta(days=longest)).isoformat() if longest else None
    if d.object_lock and not d.retention_days:
        statement = ("object lock is on: versions under a retain-until date or legal hold stay "
                     "until it passes; the bucket did not report a default retention period")
    elif until:
        statement = f"the bucket may keep deleted copies until {until}"
    else:
        statement = "the bucket reports no soft delete, object lock or retention"
    return {"location": str(config_id), "backend": d.backend, "bucket": d.bucket,
            "versioning": d.versioning, "soft_delete_days": _days(d.soft_delete_days),
            "object_lock": d.object_lock, "retention_days": _days(d.retention_days),
            "notes": list(d.notes), "retained_until": until, "statement": statement}


def store(session: Session, settings: Settings, body: dict[str, Any]) -> ErasureReceipt:
    """Sign the receipt and add it to the session's open transaction, without the subject's
    salt (``get_receipt`` derives it again)."""
    key = signing_key(settings)
    body["key_id"] = key.key_id
    signature = key.sign(body)
    stored = {**body, "subject": {k: v for k, v in body["subject"].items() if k != "salt"}}
    receipt = ErasureReceipt(id=uuid.UUID(body["id"]), tenant_id=uuid.UUID(body["tenant_id"]),
                             job_id=uuid.UUID(body["job_id"]), body=stored, signature=signature,
                             key_id=key.key_id)
    session.add(receipt)
    return receipt


def get_receipt(session: Session, actor: Actor, receipt_id: uuid.UUID,
                credentials: CredentialBox | None) -> dict[str, Any]:
    with audit.audited(session, actor, "receipt_read", detail=f"receipt {receipt_id}"):
        receipt = session.scalar(select(ErasureReceipt).where(
            ErasureReceipt.id == receipt_id, ErasureReceipt.tenant_id == actor.tenant_id))
        if receipt is None:
            raise NotFound(f"no receipt {receipt_id}")
        session.rollback()
        begin_write(session)
        audit.record(session, actor, "receipt_read", detail=f"receipt {receipt_id}")
        session.commit()
        return {**served(receipt.body, credentials), "signature": receipt.signature}


def served(body: dict[str, Any], credentials: CredentialBox | None) -> dict[str, Any]:
    """A stored receipt as it was signed: the subject's salt derived again where it was left
    out."""
    subject = body.get("subject", {})
    if "salt" in subject:  # issued before salts were derived
        return body
    salt = pseudonyms.receipt_salt(credentials, uuid.UUID(body["tenant_id"]),
                                   uuid.UUID(body["job_id"]))
    return {**body, "subject": {**subject, "salt": salt}}


def public_key(session: Session, settings: Settings, actor: Actor) -> str:
    pem = signing_key(settings).public_pem()
    begin_write(session)
    audit.record(session, actor, "receipt_key_read", detail="receipt signing public key")
    session.commit()
    return pem
