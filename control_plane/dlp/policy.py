"""A tenant's DLP policy: stored (``dlp_policies``), read through a per-process cache by the
write paths, and set or read by an admin (``PUT``/``GET /v1/dlp/policy``).

The write path asks ``policy_of`` once per write: a dictionary hit while the entry is fresh
(``TTL_SECONDS``); a change made through any process of this host makes every process's
entries stale at once (control_plane.host_board), other replicas follow when they expire
(as the active storage configuration does, plane/data_plane.py).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from .. import host_board
from ..audit import service as audit
from ..audit.service import audited
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import DlpPolicy
from ..identity import Actor
from .detect import KINDS

MODES: tuple[str, ...] = ("off", "flag", "redact", "refuse")
TTL_SECONDS = 5.0


@dataclass(frozen=True)
class Policy:
    """What explicit writes do with a detected value (``mode``) and which kinds are looked
    for. ``is_set``: the tenant set it (else these are the defaults)."""

    mode: str
    kinds: tuple[str, ...]
    is_set: bool = False
    updated_at: datetime | None = None


DEFAULT = Policy("flag", KINDS)

_lock = threading.Lock()
_cache: dict[uuid.UUID, tuple[Policy, float, int]] = {}
_generation: dict[uuid.UUID, int] = {}
clock: Callable[[], float] = time.monotonic


def _of_row(row: DlpPolicy | None) -> Policy:
    if row is None:
        return DEFAULT
    kinds = KINDS if row.kinds is None else tuple(
        k for k in KINDS if k in row.kinds.split(","))
    return Policy(row.mode, kinds, True, row.updated_at)


def load(session: Session, tenant_id: uuid.UUID) -> Policy:
    """The tenant's policy from the database (no cache)."""
    return _of_row(session.get(DlpPolicy, tenant_id, populate_existing=True))


def policy_of(session: Session, tenant_id: uuid.UUID) -> Policy:
    """The tenant's policy as the write path sees it: cached for ``TTL_SECONDS``."""
    now = clock()
    cached = _cache.get(tenant_id)
    stamp = host_board.generation(host_board.DLP)
    if cached is not None and cached[1] > now and cached[2] == stamp:
        return cached[0]
    with _lock:
        generation = _generation.get(tenant_id, 0)
    bind = session.get_bind()
    if bind.dialect.name == "sqlite" and session.in_transaction():
        # SQLite reads a whole transaction from one snapshot, which may predate the latest
        # change and its forget: cached, the old policy would screen writes for the whole
        # TTL. A session of its own reads after the generation was taken.
        with Session(bind) as fresh:
            policy = load(fresh, tenant_id)
    else:
        policy = load(session, tenant_id)
    with _lock:
        if _generation.get(tenant_id, 0) == generation:  # not forgotten meanwhile
            _cache[tenant_id] = (policy, now + TTL_SECONDS, stamp)
    return policy


def forget(tenant_id: uuid.UUID) -> None:
    """The tenant's policy changed (call after the change committed)."""
    host_board.bump(host_board.DLP)
    with _lock:
        _generation[tenant_id] = _generation.get(tenant_id, 0) + 1
        _cache.pop(tenant_id, None)


def read_policy(session: Session, actor: Actor) -> Policy:
    """The tenant's policy (the defaults while none was set); audited as ``dlp_policy_read``."""
    with audited(session, actor, "dlp_policy_read"):
        policy = load(session, actor.tenant_id)
        session.rollback()
        begin_write(session)
        audit.record(session, actor, "dlp_policy_read")
        session.commit()
        return policy


def write_policy(session: Session, actor: Actor, mode: str,
                 kinds: list[str] | None) -> Policy:
    """Replace the tenant's policy; this process's writes follow it at once. Audited as
    ``dlp_policy_update`` with the mode and kinds (no values)."""
    chosen = None if kinds is None else ",".join(k for k in KINDS if k in set(kinds))
    with audited(session, actor, "dlp_policy_update"):
        session.rollback()
        begin_write(session)
        now = utcnow()
        row = session.get(DlpPolicy, actor.tenant_id, populate_existing=True)
        if row is None:
            row = DlpPolicy(tenant_id=actor.tenant_id)
            session.add(row)
        row.mode, row.kinds, row.updated_at = mode, chosen, now
        audit.record(session, actor, "dlp_policy_update",
                     detail=f"mode={mode} kinds={chosen if chosen is not None else 'all'}")
        policy = _of_row(row)
        session.commit()
    forget(actor.tenant_id)
    return policy
