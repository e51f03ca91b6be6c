"""The database held to the checkpoints found in the buckets (``offline.py``): every sealed row's
leaf (``leaves.leaf_bytes``) recomputed, in ``seq`` order, and the tree head over them compared
with each checkpoint's root at its size.

The rows are streamed and folded into the perfect subtrees of the leaves so far (the compact
range of RFC 9162's tree, at most log2(n) hashes), so a million rows take a few megabytes."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.models import AccessLog
from ..tlog import merkle
from .chain import HASHED
from .leaves import leaf_bytes


class _Frontier:
    """The roots of the perfect subtrees that make up the leaves added so far."""

    def __init__(self) -> None:
        self.size = 0
        self._stack: list[tuple[int, bytes]] = []

    def add(self, leaf: bytes) -> None:
        level, node = 0, merkle.leaf_hash(leaf)
        while self._stack and self._stack[-1][0] == level:
            node = merkle.node_hash(self._stack.pop()[1], node)
            level += 1
        self._stack.append((level, node))
        self.size += 1

    def root(self) -> bytes:
        return merkle.fold([node for _, node in self._stack])


@dataclass(frozen=True)
class LeafReport:
    rows: int  # rows recomputed (up to the latest checkpoint)
    checkpoints: int  # checkpoints whose root the rows reproduce
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


def leaves_agree(session: Session, tenant_id: uuid.UUID,
                 heads: Sequence[tuple[int, bytes]], *, chunk: int = 5000) -> LeafReport:
    """Recompute the leaves of the tenant's sealed rows up to the largest of ``heads`` (size,
    root) and compare the tree head at every size with its root."""
    wanted = sorted(head for head in heads if head[0] > 0)
    if not wanted:
        return LeafReport(0, 0)
    last = wanted[-1][0]
    frontier = _Frontier()
    agreed, agreed_size, pending = 0, 0, 0
    rows = session.execute(  # plain rows, not ORM objects: a third less time per row
        select(*HASHED).where(AccessLog.tenant_id == tenant_id, AccessLog.seq.is_not(None),
                                AccessLog.seq <= last)
        .order_by(AccessLog.seq).execution_options(yield_per=chunk))
    problem: str | None = None
    try:  # a server-side cursor on PostgreSQL: closed before the transaction ends
        for row in rows:
            if row.seq != frontier.size + 1:
                problem = (f"row {frontier.size + 1} is missing from the database, but "
                           f"checkpoint {wanted[pending][0]} covers it: rows were removed")
                break
            frontier.add(leaf_bytes(row))
            while pending < len(wanted) and wanted[pending][0] == frontier.size:
                size, root = wanted[pending]
                if frontier.root() != root:
                    problem = (f"the database's rows 1 to {size} are not the rows checkpoint "
                               f"{size} signed: a row after row {agreed_size} was changed")
                    break
                agreed, agreed_size, pending = agreed + 1, size, pending + 1
            if problem is not None:
                break
    finally:
        rows.close()
    if problem is not None:
        session.rollback()
        return LeafReport(frontier.size, agreed, problem)
    session.rollback()
    if pending < len(wanted):
        size = wanted[pending][0]
        return LeafReport(frontier.size, agreed, (
            f"the database holds {frontier.size} sealed rows, but checkpoint {size} signed "
            f"{size}: rows were removed"))
    return LeafReport(frontier.size, agreed)
