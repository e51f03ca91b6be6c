"""A job's own audit rows proven in the tenant's transparency log, for the documents the job
hands out (an erasure receipt, an export manifest)::

    "transparency": {
      "checkpoint": "<the signed checkpoint note of the tree the rows were proven in>",
      "proofs": [{"seq": int,                  # the row (leaf index seq - 1)
                  "leaf": base64,              # its leaf input (control_plane/audit/leaves.py)
                  "hashes": [base64]}]         # its RFC 9162 inclusion proof in that tree
    }

Whoever holds the document and the log's verifier key checks, with no server and no
database, that the checkpoint is the log's, that each row is in it, and that each row names
the job (``memplane receipt verify``); the checkpoints in the tenant's bucket show that later
trees extend this one (``memplane audit verify --bucket``).

The proven rows are the ones that stand for the job as a whole — an erasure's first and last
rows (the ``audit`` range its receipt names), an export's manifest row — not one per item: a
receipt stays a few kilobytes whatever the job touched, and every other row of the job is in
the same tree (``GET /v1/audit/proof/inclusion`` proves any of them). A row is proven only
once sealed: callers seal the tenant's rows first.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..audit import leaves, notes, tree
from ..audit import service as audit
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import AccessLog
from ..jobs.service import JobContext
from ..kit import request_id_var
from ..settings import Settings


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def prove(session: Session, settings: Settings, tenant_id: uuid.UUID,
          seqs: Sequence[int]) -> dict[str, Any]:
    """The ``transparency`` block of sealed rows ``seqs``, proven in the tenant's tree now."""
    size, root = tree.head(session, tenant_id)
    rows = {row.seq: row for row in session.scalars(select(AccessLog).where(
        AccessLog.tenant_id == tenant_id, AccessLog.seq.in_(list(seqs))))}
    missing = [seq for seq in seqs if seq not in rows or seq > size]
    if missing:
        raise RuntimeError(f"audit row {missing[0]} is not sealed into the tree yet")
    return {"checkpoint": notes.signed_checkpoint(settings, tenant_id, size, root),
            "proofs": [{"seq": seq, "leaf": _b64(leaves.leaf_bytes(rows[seq])),
                        "hashes": [_b64(h) for h in tree.inclusion(session, tenant_id, seq,
                                                                    size)]}
                       for seq in seqs]}


def record_and_prove(ctx: JobContext, operation: str, detail: str) -> dict[str, Any]:
    """Add the job's audit row ``detail`` (which names the job), seal it and prove it."""
    session = ctx.session
    begin_write(session)
    row = AccessLog(tenant_id=ctx.tenant_id, accessor_type=ctx.actor.accessor_type,
                    accessor_id=ctx.actor.accessor_id, agent_id=ctx.actor.agent_id,
                    operation=operation, success=True, detail=detail,
                    request_id=request_id_var.get(), accessed_at=utcnow())
    session.add(row)
    session.flush()
    row_id = row.id
    session.commit()
    audit.seal(session, ctx.tenant_id)
    seq = session.scalar(select(AccessLog.seq).where(AccessLog.id == row_id))
    assert seq is not None  # sealed just above
    block = prove(session, ctx.settings, ctx.tenant_id, [seq])
    session.commit()
    return block
