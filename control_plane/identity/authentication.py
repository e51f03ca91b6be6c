"""Who an ``Authorization`` header names: the key looked up by its SHA-256 (keys are stored
only as their hash), and the valid keys cached for a few seconds."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from .. import host_board
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import ApiKey
from ..errors import Unauthorized
from ..kit import sha256_hex
from .access import Access
from .caller import Caller


class CallerCache:
    """Valid API keys by hash, each for ``ttl`` seconds, so a request does not look its key
    up every time. A key revoked (or its scopes changed) through any process of this host
    is refused by all of them at once: each entry carries the host's key counter it was read
    under (control_plane.host_board), and a revocation bumps it. Other replicas stop
    accepting it within ``ttl`` (``MEMPLANE_AUTH_CACHE_SECONDS``; 0 turns this off). Time
    comes from ``clock`` (monotonic seconds), so tests move it instead of sleeping."""

    def __init__(self, ttl: float = 5.0, size: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.size = ttl, size
        self.clock = clock
        self._items: dict[tuple[str, str], tuple[float, Caller, int]] = {}
        self._lock = threading.Lock()

    def get(self, where: str, digest: str) -> Caller | None:
        item = self._items.get((where, digest))
        if (item is None or item[0] <= self.clock()
                or item[2] != host_board.generation(host_board.KEYS)):
            return None
        return item[1]

    @staticmethod
    def stamp() -> int:
        """The counter to put an entry under: taken before the key is read, so a revocation
        committed meanwhile makes the entry stale."""
        return host_board.generation(host_board.KEYS)

    def put(self, where: str, digest: str, caller: Caller, stamp: int) -> None:
        if self.ttl <= 0:
            return
        with self._lock:
            if len(self._items) >= self.size:
                self._items.clear()
            self._items[(where, digest)] = (self.clock() + self.ttl, caller, stamp)

    def forget(self, digest: str) -> None:
        """The key was revoked or changed (call after the change committed): no process of
        this host uses what it cached of any key before now."""
        host_board.bump(host_board.KEYS)
        with self._lock:
            for entry in [e for e in self._items if e[1] == digest]:
                del self._items[entry]


CALLERS = CallerCache()


def _digest(authorization: str | None) -> str:
    if not authorization:
        raise Unauthorized("send your API key as 'Authorization: Bearer <key>'")
    scheme, _, raw = authorization.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <key>'")
    return sha256_hex(raw.strip().encode())


def cached_caller(engine: Engine, authorization: str | None) -> Caller | None:
    """The caller if their key was validated within the cache's time, else None (also for a
    malformed header: ``authenticate`` then explains what is wrong)."""
    try:
        digest = _digest(authorization)
    except Unauthorized:
        return None
    return CALLERS.get(_where(engine), digest)


_WHERE: weakref.WeakKeyDictionary[Engine, str] = weakref.WeakKeyDictionary()


def _where(engine: Engine) -> str:
    """The database an engine names, as the cache keys callers (rendering its URL costs
    ~20 us, every request)."""
    where = _WHERE.get(engine)
    if where is None:
        where = _WHERE.setdefault(engine, str(engine.url))
    return where


def authenticate(session: Session, authorization: str | None) -> Caller:
    digest = _digest(authorization)
    where = _where(session.get_bind().engine)  # one process may serve several databases
    cached = CALLERS.get(where, digest)
    if cached is not None:
        return cached
    stamp = CALLERS.stamp()
    key = session.scalar(select(ApiKey).where(ApiKey.key_sha256 == digest))
    if key is None or key.revoked_at is not None:
        raise Unauthorized("the API key is not valid; check it or ask an admin for a new one")
    caller = Caller(key.tenant_id, key.id, key.role, key.can_create_tenants,
                    Access.of(key.scopes, key.agent_id, key.tenant_id, key.user_id))
    _note_use(session, key)
    CALLERS.put(where, digest, caller, stamp)
    return caller


# How precisely a key's last use is kept: one write per key per hour at most.
LAST_USED_PRECISION = timedelta(hours=1)


def _note_use(session: Session, key: ApiKey) -> None:
    """Record that the key was used, if its last recorded use is an hour old or more (only a
    cache miss gets here, so a busy key costs one small write an hour, not one a request)."""
    now = utcnow()
    if key.last_used_at is not None and now - key.last_used_at < LAST_USED_PRECISION:
        return
    session.rollback()
    begin_write(session)
    session.execute(update(ApiKey).where(ApiKey.id == key.id).values(
        last_used_at=now.replace(minute=0, second=0, microsecond=0)))
    session.commit()
