"""Subject salts dropped: erasure jobs' progress and lifted legal holds no longer keep the
random salt beside the salted hash of an erased or released data subject

Erased and released subjects are now named by a keyed hash under a secret derived from the
server key, which the database never holds (``control_plane/compliance/pseudonyms.py``).
Hashes written before cannot be re-keyed (that needs the clear id, which is gone), so this
revision drops their salts: a ``sha256:<hash>`` without its salt matches nobody any more, and
a guessed name can no longer be tested against it. Two copies are beyond a migration's
reach: the first audit row of each earlier erasure (``… (salt …)``), which the hash chain and
the signed checkpoints in the tenant's bucket seal, and the receipts signed before this
revision, whose signature covers their salt.

Revision ID: 0030
Revises: 0016 (and needs 0004)
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0016"
branch_labels = None
depends_on = ("0004",)

_jobs = sa.table("jobs", sa.column("id", sa.Uuid), sa.column("kind", sa.String),
                 sa.column("progress", sa.JSON))
_holds = sa.table("legal_holds", sa.column("id", sa.String),
                  sa.column("subject_hash", sa.String))


def upgrade() -> None:
    bind = op.get_bind()
    for job_id, progress in bind.execute(
            sa.select(_jobs.c.id, _jobs.c.progress).where(_jobs.c.kind == "erase")).all():
        if isinstance(progress, dict) and "salt" in progress:
            kept: dict[str, Any] = {k: v for k, v in progress.items() if k != "salt"}
            bind.execute(_jobs.update().where(_jobs.c.id == job_id).values(progress=kept))
    for hold_id, hashed in bind.execute(
            sa.select(_holds.c.id, _holds.c.subject_hash)
            .where(_holds.c.subject_hash.like("sha256:%:%"))).all():
        bind.execute(_holds.update().where(_holds.c.id == hold_id)
                     .values(subject_hash=hashed.rsplit(":", 1)[0]))


def downgrade() -> None:
    """Nothing to restore: the salts are gone for good."""
