"""Encryption keys (DESIGN §6): tenant KEKs, per-subject keys, rotation and crypto-shredding.

Three levels:

- the tenant's **KEK**, in a provider (``providers.py``: local key ring or AWS KMS), in
  numbered versions (``kek_versions``); new subject keys are wrapped by the newest;
- a **subject key** per data subject (``user``/<user id>) and per non-personal scope
  (<scope>/<scope ref>), random 256-bit, stored only wrapped (``subject_keys``);
- a **data key** per object, inside the object's envelope (``storage_adapters/envelope.py``).

A pointer's object is sealed under the subject key of the pointer's ``subject_user_id`` when
it has one, else under its scope's key; so destroying a user's key (:func:`shred_subject`)
makes every object of that subject unreadable at once — soft-deleted copies, old versions and
backups included. Rotating a KEK (:func:`rotate_kek`) re-wraps subject keys only; no object
is re-uploaded, and reads and writes keep working throughout, because an unwrapped subject
key does not change when its wrapping does.

Unwrapped subject keys are cached in memory (bounded LRU with a time limit) so the hot path
does not call the KMS. Every read still looks the subject key's row up, so a key shredded by
another process is refused at once, cached or not.
"""

from __future__ import annotations

import fnmatch
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from sqlalchemy import exc as sa_exc
from sqlalchemy import select
from sqlalchemy.orm import Session

from storage_adapters import envelope
from storage_adapters.envelope import DecryptionError

from ..audit import service as audit
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import KekVersion, SubjectKey
from ..errors import Conflict, InvalidInput, KeyServiceUnavailable
from ..settings import Settings
from . import repository as repo
from .providers import AwsKms, KekProvider, KeyUnavailable, LocalKeyRing, WrongKey

USER = "user"
_REWRAP_BATCH = 500


class KeyCache:
    """Unwrapped subject keys by id: least recently used out first, each for ``ttl`` seconds."""

    def __init__(self, size: int, ttl: float) -> None:
        self.size, self.ttl = size, ttl
        self._items: OrderedDict[uuid.UUID, tuple[float, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key_id: uuid.UUID) -> bytes | None:
        # Read without the lock (one dictionary lookup is atomic; the lock orders changes):
        # every read of a batch asks for its subject's key, and queueing on the lock under
        # load cost more than the lookup. A key forgotten before the lookup is not found.
        item = self._items.get(key_id)
        if item is None:
            return None
        if item[0] < time.monotonic():
            with self._lock:
                if self._items.get(key_id) is item:
                    del self._items[key_id]
            return None
        if self._lock.acquire(blocking=False):  # recency is best effort: a hit never waits
            try:
                if key_id in self._items:
                    self._items.move_to_end(key_id)
            finally:
                self._lock.release()
        return item[1]

    def put(self, key_id: uuid.UUID, key: bytes) -> None:
        if self.size == 0 or self.ttl == 0:
            return
        with self._lock:
            self._items[key_id] = (time.monotonic() + self.ttl, key)
            self._items.move_to_end(key_id)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def forget(self, key_ids: list[uuid.UUID]) -> None:
        with self._lock:
            for key_id in key_ids:
                self._items.pop(key_id, None)

    def __len__(self) -> int:
        return len(self._items)


class Keyring:
    """The providers and the key cache of one running control plane (API, CLI or worker)."""

    def __init__(self, settings: Settings) -> None:
        self.enabled = settings.encryption
        self.default_provider = settings.kek_provider
        self._settings = settings
        self._providers: dict[str, KekProvider] = {}
        self._lock = threading.Lock()
        self.cache = KeyCache(settings.key_cache_size, settings.key_cache_seconds)

    def allows_key_ref(self, tenant_id: uuid.UUID, key_ref: str) -> bool:
        """Whether a tenant may move its KEK to this KMS key: the operator's allow-list
        (MEMPLANE_KEK_AWS_ALLOWED_KEY_REFS: exact refs or ``*`` patterns, ``{tenant_id}``
        standing for the tenant's own id), by default only the server's own key."""
        for pattern in self._settings.allowed_kms_key_refs:
            if fnmatch.fnmatchcase(key_ref, pattern.replace("{tenant_id}", str(tenant_id))):
                return True
        return False

    def provider(self, name: str) -> KekProvider:
        with self._lock:
            found = self._providers.get(name)
            if found is None:
                found = self._providers[name] = self._build(name)
            return found

    def _build(self, name: str) -> KekProvider:
        s = self._settings
        if name == "local":
            return LocalKeyRing(s.resolved_keyring_path)
        if name == "aws-kms" and s.kek_aws_key_id:
            secret = s.kek_aws_secret_access_key
            return AwsKms(s.kek_aws_key_id, region=s.kek_aws_region,
                          endpoint_url=s.kek_aws_endpoint_url,
                          access_key_id=s.kek_aws_access_key_id,
                          secret_access_key=secret.get_secret_value() if secret else None)
        raise KeyServiceUnavailable(
            f"the KEK provider {name!r} is not configured on this server; set "
            f"MEMPLANE_KEK_PROVIDER and its MEMPLANE_KEK_* settings"
        )


@dataclass(frozen=True)
class SubjectKeyHandle:
    id: uuid.UUID
    scope_type: str
    scope_ref: str
    key: bytes = field(repr=False)

    @property
    def subject(self) -> tuple[str, str]:
        return self.scope_type, self.scope_ref


def subject_of(scope_type: str, scope_ref: str, subject_user_id: str | None) -> tuple[str, str]:
    """Which key seals a pointer's objects: its data subject's, else its scope's."""
    return (USER, subject_user_id) if subject_user_id else (scope_type, scope_ref)


def _wrap_context(tenant_id: uuid.UUID, key_id: uuid.UUID) -> bytes:
    return b"memplane-subject-key-v1" + tenant_id.bytes + key_id.bytes


def _no_checkpoint(step: str) -> None:
    """Tests replace this to run a rotation or a retirement at a named step ("unwrap":
    about to unwrap a subject key through its KEK; "key-wrapped": a new subject key is
    wrapped, its row not yet written); in production it does nothing."""


checkpoint: Callable[[str], None] = _no_checkpoint


class WrappedKey(NamedTuple):
    """What unwrapping a subject key reads of its row, for a key a lookup already found
    (building the ORM row instead cost more than the cache hit that usually follows)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    wrapped_key: bytes | None
    kek_version_id: uuid.UUID


def _unwrap(session: Session, ring: Keyring, row: SubjectKey | WrappedKey) -> bytes:
    cached = ring.cache.get(row.id)
    if cached is not None:
        return cached
    kek = session.get(KekVersion, row.kek_version_id)
    assert kek is not None and row.wrapped_key is not None
    checkpoint("unwrap")
    try:
        key = ring.provider(kek.provider).unwrap(kek.key_ref, row.wrapped_key,
                                                 _wrap_context(row.tenant_id, row.id))
    except KeyUnavailable as exc:
        rewrapped = _unwrap_rewrapped(session, ring, row)
        if rewrapped is None:
            raise KeyServiceUnavailable(
                f"the tenant's key-encryption key is unavailable ({exc}); retry later"
            ) from None
        key = rewrapped
    ring.cache.put(row.id, key)
    return key


def _unwrap_rewrapped(session: Session, ring: Keyring,
                      row: SubjectKey | WrappedKey) -> bytes | None:
    """The key as it is wrapped now, if a rotation re-wrapped it since ``row`` was read.

    A reader (an export, an erasure, a read) holding a row read before a rotation would
    otherwise try the old KEK, which a retirement may have destroyed meanwhile: it would
    fail though the key is sound. Read on a connection of its own: the caller's transaction
    may be a snapshot from before the rotation."""
    with session.get_bind().engine.connect() as conn:
        now = conn.execute(
            select(SubjectKey.wrapped_key, KekVersion.provider, KekVersion.key_ref)
            .join(KekVersion, KekVersion.id == SubjectKey.kek_version_id)
            .where(SubjectKey.id == row.id, SubjectKey.tenant_id == row.tenant_id)
        ).first()
    if now is None or now.wrapped_key is None or bytes(now.wrapped_key) == row.wrapped_key:
        return None
    try:
        return ring.provider(now.provider).unwrap(now.key_ref, bytes(now.wrapped_key),
                                                  _wrap_context(row.tenant_id, row.id))
    except KeyUnavailable:
        return None


def _current_kek(session: Session, ring: Keyring, tenant_id: uuid.UUID) -> KekVersion:
    """The KEK version new subject keys are wrapped by, created on the tenant's first use."""
    while True:
        kek = repo.current_kek(session, tenant_id)
        if kek is not None:
            return kek
        session.commit()
        provider = ring.provider(ring.default_provider)
        key_ref = provider.create(tenant_id)
        begin_write(session)
        try:
            session.add(KekVersion(id=new_id(), tenant_id=tenant_id,
                                   version=repo.next_kek_version(session, tenant_id),
                                   provider=provider.name, key_ref=key_ref, created_at=utcnow()))
            audit.record(session, audit.Actor(tenant_id, "system", "keys"), "kek_create",
                         detail=f"KEK version created with provider {provider.name}")
            session.commit()
        except sa_exc.IntegrityError:
            session.rollback()  # a concurrent first use made it; read theirs


def active_key(session: Session, ring: Keyring, tenant_id: uuid.UUID,
               subject: tuple[str, str]) -> SubjectKeyHandle | None:
    """The subject's live key inside the caller's transaction, or None if it has none yet."""
    row = repo.active_subject_key(session, tenant_id, *subject)
    if row is None:
        return None
    return SubjectKeyHandle(row.id, row.scope_type, row.scope_ref, _unwrap(session, ring, row))


def handle_of(session: Session, ring: Keyring, tenant_id: uuid.UUID, key_id: uuid.UUID,
              subject: tuple[str, str], wrapped_key: bytes,
              kek_version_id: uuid.UUID) -> SubjectKeyHandle:
    """A live key already looked up (by the hot path's own statement): unwrapped from the
    cache, or through its KEK on a miss."""
    row = WrappedKey(key_id, tenant_id, wrapped_key, kek_version_id)
    return SubjectKeyHandle(key_id, subject[0], subject[1], _unwrap(session, ring, row))


def key_for_write(session: Session, ring: Keyring, tenant_id: uuid.UUID,
                  subject: tuple[str, str]) -> SubjectKeyHandle:
    """The subject's live key, created (in a transaction of its own, committed) if needed."""
    for _ in range(5):
        found = active_key(session, ring, tenant_id, subject)
        if found is not None:
            return found
        kek = _current_kek(session, ring, tenant_id)
        session.commit()
        key_id, raw = new_id(), envelope.new_key()
        try:
            wrapped = ring.provider(kek.provider).wrap(kek.key_ref, raw,
                                                       _wrap_context(tenant_id, key_id))
        except KeyUnavailable as exc:
            raise KeyServiceUnavailable(
                f"the tenant's key-encryption key is unavailable ({exc}); retry later"
            ) from None
        checkpoint("key-wrapped")
        begin_write(session)
        if repo.active_subject_key(session, tenant_id, *subject) is not None:
            session.rollback()
            continue
        if not repo.kek_still_live(session, kek.id):
            # Retired (and its key perhaps destroyed) since it was current: a key wrapped
            # by it would be unreadable for good. Wrap again under the current one.
            session.rollback()
            continue
        session.add(SubjectKey(id=key_id, tenant_id=tenant_id, scope_type=subject[0],
                               scope_ref=subject[1], kek_version_id=kek.id,
                               wrapped_key=wrapped, created_at=utcnow()))
        audit.record(session, audit.Actor(tenant_id, "system", "keys"), "key_create",
                     detail=f"subject key {key_id} for {subject[0]} (KEK v{kek.version})")
        try:
            session.commit()
        except sa_exc.IntegrityError:
            session.rollback()  # another writer created the subject's key first
            continue
        ring.cache.put(key_id, raw)
        return SubjectKeyHandle(key_id, subject[0], subject[1], raw)
    raise Conflict("the subject's key kept changing while it was being created; retry")


def _version_id(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name[:-5] if name.endswith(".json") else name


def seal_object(ring: Keyring, tenant_id: uuid.UUID, handle: SubjectKeyHandle | None,
                path: str, pointer_id: uuid.UUID, plaintext: bytes) -> bytes:
    """The bytes to store at ``path`` for the pointer ``pointer_id``."""
    if not ring.enabled or handle is None:
        return plaintext
    context = envelope.associated_data(tenant_id, path, _version_id(path), pointer_id)
    return envelope.seal(plaintext, key_id=handle.id, subject_key=handle.key, context=context)


def open_object(session: Session, ring: Keyring, tenant_id: uuid.UUID, path: str,
                pointer_id: uuid.UUID, blob: bytes,
                live: tuple[uuid.UUID, bytes, uuid.UUID] | None = None) -> bytes:
    """The plaintext of a stored object; :class:`DecryptionError` if it does not open.

    ``live`` is the pointer's live subject key as the caller's lookup found it (id, wrapped
    key, KEK version): an object sealed under it needs no further lookup. An object without
    an envelope is served as is only while encryption is switched off.
    """
    if not envelope.is_envelope(blob):
        if ring.enabled:
            raise DecryptionError("the object is not encrypted, but every object written "
                                  "with encryption on is (replaced outside memplane?)")
        return blob
    header = envelope.read_header(blob)
    row: SubjectKey | WrappedKey | None
    if live is not None and live[0] == header.key_id:
        row = WrappedKey(live[0], tenant_id, live[1], live[2])
    else:
        row = repo.subject_key(session, tenant_id, header.key_id)
    return open_with(tenant_id, path, pointer_id, blob, _usable(session, ring, row), header)


def open_with(tenant_id: uuid.UUID, path: str, pointer_id: uuid.UUID, blob: bytes,
              key: bytes, header: envelope.Header | None = None) -> bytes:
    """The plaintext of an object sealed under ``key`` (unwrapped by :func:`key_to_open`):
    no database, so a worker thread may open it; :class:`DecryptionError` if it does not."""
    context = envelope.associated_data(tenant_id, path, _version_id(path), pointer_id)
    return envelope.open_sealed(blob, subject_key=key, context=context, header=header)


def key_to_open(session: Session, ring: Keyring, tenant_id: uuid.UUID,
                key_id: uuid.UUID) -> bytes:
    """The unwrapped subject key an envelope's header names, for objects opened in a stream
    (export archives) or in worker threads; :class:`DecryptionError` if the tenant has no
    such key or it was destroyed."""
    return _usable(session, ring, repo.subject_key(session, tenant_id, key_id))


def _usable(session: Session, ring: Keyring, row: SubjectKey | WrappedKey | None) -> bytes:
    """The subject key ``row`` holds, unwrapped; :class:`DecryptionError` if there is none,
    it was destroyed, or it does not unwrap."""
    if row is None:
        raise DecryptionError("the object was encrypted under a key this tenant does not have")
    if row.wrapped_key is None:
        raise DecryptionError("the object's subject key was destroyed (crypto-shredded); "
                              "its content can never be read again")
    try:
        return _unwrap(session, ring, row)
    except WrongKey:
        raise DecryptionError("the subject key's wrapped form does not unwrap with its "
                              "KEK (edited in the database?)") from None


@dataclass(frozen=True)
class RotationReport:
    tenant_id: uuid.UUID
    from_versions: list[int]
    to_version: int
    provider: str
    rewrapped: int


def rotate_kek(session: Session, ring: Keyring, actor: audit.Actor, *,
               key_ref: str | None = None, provider: str | None = None) -> RotationReport:
    """Move the tenant to a new KEK version: every subject key is re-wrapped, no object moves.

    Commits in steps: the new version first (new subject keys use it at once), then each
    batch of re-wrapped keys. Interrupted, it is finished by running it again; reads and
    writes keep working in between because a key is readable under either version.
    """
    tenant_id = actor.tenant_id
    name = provider or ring.default_provider
    try:
        chosen = ring.provider(name)
    except KeyServiceUnavailable:
        if provider is None:
            raise
        # The caller asked for a provider this server has no settings for: their input.
        raise InvalidInput(f"the KEK provider {provider!r} is not configured on this server; "
                           "leave provider out to use the configured one") from None
    if key_ref is not None and name == "local":
        raise InvalidInput("key_ref names a KMS key; the local key ring makes its own keys, "
                           "so leave key_ref out")
    if key_ref is not None and not ring.allows_key_ref(tenant_id, key_ref):
        raise InvalidInput("this server does not let tenants use that KMS key; leave key_ref "
                           "out to use the server's key, or ask the operator to add it to "
                           "MEMPLANE_KEK_AWS_ALLOWED_KEY_REFS")
    session.commit()
    before = [k.version for k in repo.kek_versions(session, tenant_id) if k.retired_at is None]
    session.commit()
    ref = key_ref or chosen.create(tenant_id)
    begin_write(session)
    version = repo.next_kek_version(session, tenant_id)
    new = KekVersion(id=new_id(), tenant_id=tenant_id, version=version, provider=chosen.name,
                     key_ref=ref, created_at=utcnow())
    session.add(new)
    audit.record(session, actor, "kek_rotate", detail=f"KEK version {version} "
                 f"({chosen.name}) is now current")
    session.commit()
    rewrapped = 0
    while True:
        rows = repo.wrapped_by_older(session, tenant_id, new.id, _REWRAP_BATCH)
        if not rows:
            session.commit()
            break
        updates = []
        for row in rows:
            raw = _unwrap(session, ring, row)
            try:
                wrapped = chosen.wrap(new.key_ref, raw, _wrap_context(tenant_id, row.id))
            except KeyUnavailable as exc:
                raise KeyServiceUnavailable(f"the new KEK cannot wrap keys ({exc})") from None
            updates.append((row, row.kek_version_id, wrapped))
        session.commit()
        begin_write(session)
        now = utcnow()
        done = sum(repo.rewrap(session, row, old, new.id, wrapped, now)
                   for row, old, wrapped in updates)
        audit.record(session, actor, "kek_rotate",
                     detail=f"re-wrapped {done} subject key(s) under KEK version {version}")
        session.commit()
        rewrapped += done
    return RotationReport(tenant_id, before, version, chosen.name, rewrapped)


@dataclass(frozen=True)
class RetireReport:
    tenant_id: uuid.UUID
    retired: list[int]
    in_use: dict[int, int]
    current: int | None


def retire_keks(session: Session, ring: Keyring, actor: audit.Actor) -> RetireReport:
    """Retire every KEK version but the current one that no live subject key is wrapped by.

    A retired local KEK is removed from the key ring; a KMS key is left to its owner.
    """
    session.commit()
    begin_write(session)
    tenant_id = actor.tenant_id
    # Lock the versions before counting their keys: a writer adding a key under one holds
    # it (``kek_still_live``), so a key is either counted here or sees the retirement.
    repo.lock_kek_versions(session, tenant_id)
    current = repo.current_kek(session, tenant_id)
    counts = repo.keys_per_version(session, tenant_id)
    retired: list[KekVersion] = []
    in_use: dict[int, int] = {}
    for kek in repo.kek_versions(session, tenant_id):
        if kek.retired_at is not None or current is None or kek.id == current.id:
            continue
        if counts.get(kek.id, 0):
            in_use[kek.version] = counts[kek.id]
            continue
        kek.retired_at = utcnow()
        retired.append(kek)
    audit.record(session, actor, "kek_retire",
                 detail=f"retired KEK version(s) {[k.version for k in retired]}; "
                        f"still in use {in_use}")
    session.commit()
    for kek in retired:
        if kek.key_ref not in {k.key_ref for k in repo.kek_versions(session, tenant_id)
                               if k.retired_at is None}:
            ring.provider(kek.provider).destroy(kek.key_ref)
    session.commit()
    return RetireReport(tenant_id, [k.version for k in retired], in_use,
                        current.version if current else None)


def shred_subject(session: Session, tenant_id: uuid.UUID, user_id: str) -> int:
    """Crypto-shred a data subject: destroy their subject key(s); returns how many.

    The wrapped key is overwritten (NULL) and the row kept as a tombstone, so reads of
    anything sealed under it fail with a clear "destroyed" error rather than "unknown key".
    Every object, version, soft-deleted copy and backup sealed under it is beyond use from
    this commit on, in every process: reads look the row up even when the key is cached.
    Commits (any open transaction first), and audits, even when there was nothing to shred.
    """
    begin_write(session)
    destroyed = repo.destroy_subject(session, tenant_id, USER, user_id, utcnow())
    audit.record(session, audit.Actor(tenant_id, "system", "crypto-shred"), "key_shred",
                 detail=f"destroyed {destroyed} subject key(s) of a data subject")
    session.commit()
    return destroyed


@dataclass(frozen=True)
class KekStatus:
    version: int
    provider: str
    current: bool
    retired: bool
    subject_keys: int


def kek_status(session: Session, tenant_id: uuid.UUID) -> list[KekStatus]:
    current = repo.current_kek(session, tenant_id)
    counts = repo.keys_per_version(session, tenant_id)
    rows = [KekStatus(k.version, k.provider, current is not None and k.id == current.id,
                      k.retired_at is not None, counts.get(k.id, 0))
            for k in repo.kek_versions(session, tenant_id)]
    session.commit()
    return rows


def rotate_kek_as(session: Session, ring: Keyring, actor: audit.Actor, *,
                  key_ref: str | None = None, provider: str | None = None) -> RotationReport:
    with audit.audited(session, actor, "kek_rotate"):
        return rotate_kek(session, ring, actor, key_ref=key_ref, provider=provider)


def retire_keks_as(session: Session, ring: Keyring, actor: audit.Actor) -> RetireReport:
    with audit.audited(session, actor, "kek_retire"):
        return retire_keks(session, ring, actor)


def kek_status_as(session: Session, actor: audit.Actor) -> list[KekStatus]:
    rows = kek_status(session, actor.tenant_id)
    begin_write(session)
    audit.record(session, actor, "kek_list", detail=f"{len(rows)} KEK version(s)")
    session.commit()
    return rows
