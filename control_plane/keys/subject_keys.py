"""Encryption keys (DESIGN §6): per-subject keys, sealing objects under them, crypto-shredding.

Three levels:

- the tenant's **KEK**, in a provider (``control_plane/plane/kek_providers.py``: local key
  ring or AWS KMS), in numbered versions (``kek_versions``); new subject keys are wrapped by
  the newest (rotation and retirement: ``rotation.py``);
- a **subject key** per data subject (``user``/<user id>) and per non-personal scope
  (<scope>/<scope ref>), random 256-bit, stored only wrapped (``subject_keys``);
- a **data key** per object, inside the object's envelope (``storage_adapters/envelope.py``).

A pointer's object is sealed under the subject key of the pointer's ``subject_user_id`` when
it has one, else under its scope's key; so destroying a user's key (:func:`shred_subject`)
makes every object of that subject unreadable at once — soft-deleted copies, old versions and
backups included.

Unwrapped subject keys are cached by the keyring (``control_plane/plane/keyring.py``); every
read still looks the subject key's row up, so a key shredded by another process is refused
at once, cached or not.
"""

from __future__ import annotations

import uuid
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
from ..errors import Conflict, KeyServiceUnavailable
from ..identity import Actor
from ..plane.kek_providers import KeyUnavailable, WrongKey
from ..plane.keyring import Keyring
from . import repository as repo

USER = "user"


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


def wrap_context(tenant_id: uuid.UUID, key_id: uuid.UUID) -> bytes:
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


def unwrap(session: Session, ring: Keyring, row: SubjectKey | WrappedKey) -> bytes:
    cached = ring.cache.get(row.id)
    if cached is not None:
        return cached
    kek = session.get(KekVersion, row.kek_version_id)
    assert kek is not None and row.wrapped_key is not None
    checkpoint("unwrap")
    try:
        key = ring.provider(kek.provider).unwrap(kek.key_ref, row.wrapped_key,
                                                 wrap_context(row.tenant_id, row.id))
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
                                                  wrap_context(row.tenant_id, row.id))
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
            audit.record(session, Actor(tenant_id, "system", "keys"), "kek_create",
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
    return SubjectKeyHandle(row.id, row.scope_type, row.scope_ref, unwrap(session, ring, row))


def handle_of(session: Session, ring: Keyring, tenant_id: uuid.UUID, key_id: uuid.UUID,
              subject: tuple[str, str], wrapped_key: bytes,
              kek_version_id: uuid.UUID) -> SubjectKeyHandle:
    """A live key already looked up (by the hot path's own statement): unwrapped from the
    cache, or through its KEK on a miss."""
    row = WrappedKey(key_id, tenant_id, wrapped_key, kek_version_id)
    return SubjectKeyHandle(key_id, subject[0], subject[1], unwrap(session, ring, row))


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
                                                       wrap_context(tenant_id, key_id))
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
        audit.record(session, Actor(tenant_id, "system", "keys"), "key_create",
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
        return unwrap(session, ring, row)
    except WrongKey:
        raise DecryptionError("the subject key's wrapped form does not unwrap with its "
                              "KEK (edited in the database?)") from None


class SubjectKeyOpener:
    """The tenant's subject keys by id, unwrapped with the running keyring: what the audit
    log needs to open the details sealed under them (``audit.sealed.reveal``; the data
    plane's ``SubjectKeys``)."""

    def __init__(self, ring: Keyring | None) -> None:
        self.ring = ring

    def unwrapped(self, session: Session, tenant_id: uuid.UUID,
                  key_id: uuid.UUID) -> bytes | None:
        """The key, or None if the tenant has no such key or it was destroyed;
        :class:`KeyServiceUnavailable` if it cannot be unwrapped now (or without a keyring)."""
        row = repo.subject_key(session, tenant_id, key_id)
        if row is None or row.wrapped_key is None:
            return None
        if self.ring is None:
            raise KeyServiceUnavailable("this process has no keyring to unwrap subject keys")
        return handle_of(session, self.ring, tenant_id, row.id, (row.scope_type, row.scope_ref),
                         row.wrapped_key, row.kek_version_id).key


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
    audit.record(session, Actor(tenant_id, "system", "crypto-shred"), "key_shred",
                 detail=f"destroyed {destroyed} subject key(s) of a data subject")
    session.commit()
    return destroyed
