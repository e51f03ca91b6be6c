"""KEK rotation and retirement (DESIGN §6), and the tenant's view of its KEK versions.

Rotating a KEK (:func:`rotate_kek`) re-wraps subject keys only; no object is re-uploaded,
and reads and writes keep working throughout, because an unwrapped subject key does not
change when its wrapping does. Retiring (:func:`retire_keks`) ends the KEK versions no live
subject key is wrapped by.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass

from sqlalchemy.orm import Session

from ..audit import service as audit
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import KekVersion
from ..errors import InvalidInput, KeyServiceUnavailable
from ..identity import Actor
from ..plane.kek_providers import KeyUnavailable
from ..plane.keyring import Keyring
from . import repository as repo
from .subject_keys import unwrap, wrap_context

_REWRAP_BATCH = 500


@dataclass(frozen=True)
class RotationReport:
    tenant_id: uuid.UUID
    from_versions: list[int]
    to_version: int
    provider: str
    rewrapped: int


def rotate_kek(session: Session, ring: Keyring, actor: Actor, *,
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
    new_version_id = new_id()
    # One wrap before the version is saved: a key that cannot wrap (missing, disabled, no
    # permission) must never become current, or every new subject's write would fail.
    try:
        chosen.wrap(ref, secrets.token_bytes(32), wrap_context(tenant_id, new_version_id))
    except KeyUnavailable as exc:
        raise KeyServiceUnavailable(f"the new KEK cannot wrap keys ({exc}); the tenant stays "
                                    "on its current KEK version") from None
    begin_write(session)
    version = repo.next_kek_version(session, tenant_id)
    new = KekVersion(id=new_version_id, tenant_id=tenant_id, version=version,
                     provider=chosen.name, key_ref=ref, created_at=utcnow())
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
            raw = unwrap(session, ring, row)
            try:
                wrapped = chosen.wrap(new.key_ref, raw, wrap_context(tenant_id, row.id))
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


def retire_keks(session: Session, ring: Keyring, actor: Actor) -> RetireReport:
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


def rotate_kek_as(session: Session, ring: Keyring, actor: Actor, *,
                  key_ref: str | None = None, provider: str | None = None) -> RotationReport:
    with audit.audited(session, actor, "kek_rotate"):
        return rotate_kek(session, ring, actor, key_ref=key_ref, provider=provider)


def retire_keks_as(session: Session, ring: Keyring, actor: Actor) -> RetireReport:
    with audit.audited(session, actor, "kek_retire"):
        return retire_keks(session, ring, actor)


def kek_status_as(session: Session, actor: Actor) -> list[KekStatus]:
    rows = kek_status(session, actor.tenant_id)
    begin_write(session)
    audit.record(session, actor, "kek_list", detail=f"{len(rows)} KEK version(s)")
    session.commit()
    return rows
