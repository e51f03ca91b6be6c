"""An erasure's last step (step 7 of ``erasure.py``): the last audit row, the audit chain
sealed, the Ed25519-signed receipt stored (``receipts.py``) with the erasure's first and last
rows proven in the tenant's transparency log (``proofs.py``), the write block lifted, and
nothing personal of the subject left in the control plane: this job and the subject's
earlier exports keep only a keyed hash of the id (``pseudonyms.py``: the database alone
cannot test a guess against it), the destroyed key's tombstone is renamed to that hash, the
subject's idempotency answers are deleted (step 3 deletes those of each batch), and on
SQLite the write-ahead log is checkpointed and truncated so that, with ``secure_delete``, no
freed page keeps an old row (``db.engine.scrub_freed``)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, update

from .. import idempotency
from ..audit import service as audit
from ..conversations import repository as conversations
from ..db.base import new_id, utcnow
from ..db.engine import begin_write, scrub_freed
from ..db.models import Job, SubjectErasure, SubjectKey
from ..keys import pseudonyms
from ..keys import repository as keys_repo
from . import erasure_derived as derived
from . import erasure_leftovers as leftovers
from . import proofs, receipts
from .erasure_walk import ErasureWalk, audit_row


def finish(walk: ErasureWalk) -> dict[str, Any]:
    """Write the receipt and leave nothing of the subject in the control plane; the job's
    result (counts, the receipt's id)."""
    session, ctx, user_id = walk.session, walk.ctx, walk.user_id
    if "receipt_id" not in walk.p:
        begin_write(session)
        receipt_id = new_id()
        row = audit_row(session, ctx,
                        detail=f"job {ctx.job_id}: erasure completed; "
                               f"receipt {receipt_id}")
        ctx.save(receipt_id=str(receipt_id), end_audit_id=row.id,
                 finished_at=utcnow().isoformat())
        session.commit()
    ctx.checkpoint("before_receipt")
    receipt_id = uuid.UUID(walk.p["receipt_id"])
    audit.seal(session, ctx.tenant_id)
    counts = {name: walk.count(name)
              for name in ("pointers", "objects", "versions", "orphans", "exports",
                           "events", "entries", "compactor_entries", *derived.COUNTS)}
    work_done = any(counts.values()) or bool(walk.p["keys"]["destroyed"])
    targets = walk.targets()
    descriptions = [(t.config_id, walk.objects.describe(t)) for t in targets]
    begin_write(session)
    body = receipts.build(
        session, receipt_id=receipt_id, job_id=ctx.job_id,
        tenant_id=ctx.tenant_id, user_id=user_id, progress=walk.p,
        counts=counts, descriptions=descriptions, work_done=work_done,
        credentials=ctx.plane.credentials)
    body["transparency"] = proofs.prove(  # the rows the receipt names, sealed above
        session, ctx.settings, ctx.tenant_id,
        sorted({body["audit"]["first_seq"], body["audit"]["last_seq"]}))
    receipts.store(session, ctx.settings, body)
    session.execute(delete(SubjectErasure).where(
        SubjectErasure.tenant_id == ctx.tenant_id,
        SubjectErasure.user_id == user_id))
    # The raw id leaves the control plane: every row that named the subject or one of
    # its conversations keeps a keyed hash of it instead (erasure_leftovers.py).
    hashed = pseudonyms.pseudonym(ctx.plane.credentials, ctx.tenant_id, user_id)
    # Their messages and summaries went with the pointers; their keys go too.
    owned = conversations.forget_subject(session, ctx.tenant_id, user_id)
    leftovers.scrub_jobs(session, ctx.tenant_id, user_id, owned, hashed, ctx.job_id)
    session.execute(update(Job).where(Job.id == ctx.job_id).values(subject=hashed))
    revoked = leftovers.retire_agent_keys(ctx, user_id, owned, hashed)
    leftovers.hash_lifted_holds(session, ctx.tenant_id, owned, hashed)
    leftovers.forget_gc_prefixes(session, targets, user_id, owned)
    session.execute(update(SubjectKey).where(
        SubjectKey.tenant_id == ctx.tenant_id, SubjectKey.scope_type == "user",
        SubjectKey.scope_ref == user_id, SubjectKey.destroyed_at.is_not(None))
        .values(scope_ref=hashed))
    idempotency.forget_subject(session, ctx.tenant_id, user_id)
    idempotency.purge_expired(session)
    keys_repo.retire_scopes(session, ctx.tenant_id, "conversation", owned, hashed, utcnow())
    result: dict[str, Any] = {"receipt_id": str(receipt_id), "work_done": work_done,
                              "counts": {**counts, "keys": walk.p["keys"]["destroyed"]}}
    if not work_done:
        result["note"] = ("nothing of this subject was found; nothing was deleted (the "
                          "subject was already erased or never stored)")
    ctx.save(result=result)
    session.commit()
    leftovers.forget_revoked(revoked)
    scrub_freed(session)
    return result
