"""Tenants and their API keys: creating, revoking, the first start's bootstrap key, and the
audited refusal of a role. Keys are stored only as SHA-256; who a key names is
control_plane.identity."""

from __future__ import annotations

import logging
import secrets
import unicodedata
import uuid
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import exc as sa_exc
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..addresses import MAX_SCOPE_REF_BYTES, MAX_SCOPE_REF_CHARS, nfc, validate_segment
from ..audit import service as audit
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import ApiKey, Tenant
from ..errors import Forbidden, InvalidInput, NotFound
from ..identity import ANY_REF, CALLERS, TENANT_REF, Actor, Caller, canonical_scope
from ..kit import sha256_hex
from ..plane.data_plane import default_config
from ..secret_files import create_secret_file, remove_secret_file
from .schemas import WhoAmI

log = logging.getLogger(__name__)

ROLES = ("admin", "agent", "compliance", "user")
KEY_PREFIX = "mp_"


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def require_role(session: Session, caller: Caller, roles: tuple[str, ...], action: str) -> None:
    if caller.role in roles:
        return
    # A data subject's own key (role user) is never the fix to name: it is no caller's to
    # have but its subject's.
    suggested = " or ".join(role for role in roles if role != "user")
    audit.record_failure(session, caller.actor, "access_denied",
                         detail=f"{action} needs role {suggested}")
    raise Forbidden(f"a key with role '{caller.role}' may not {action}; "
                    f"use a key with role {suggested}")


def _add_key(session: Session, tenant_id: uuid.UUID, role: str, name: str, raw: str,
             *, can_create_tenants: bool = False, scopes: list[dict[str, str]] | None = None,
             agent_id: str | None = None, user_id: str | None = None) -> ApiKey:
    key = ApiKey(tenant_id=tenant_id, key_sha256=sha256_hex(raw.encode()), prefix=raw[:10],
                 role=role, name=name, can_create_tenants=can_create_tenants, scopes=scopes,
                 agent_id=agent_id, user_id=user_id)
    session.add(key)
    return key


def create_tenant(session: Session, name: str, *, admin_key: str | None = None,
                  can_create_tenants: bool = False) -> tuple[Tenant, str]:
    """A tenant with its default storage, audit chain head and first admin key (returned once)."""
    raw = admin_key or new_key()
    begin_write(session)
    tenant = Tenant(name=name)
    session.add(tenant)
    session.flush()
    session.add(default_config(tenant.id))
    audit.create_head(session, tenant.id)
    key = _add_key(session, tenant.id, "admin", "initial admin key", raw,
                   can_create_tenants=can_create_tenants)
    session.flush()
    audit.record(session, Actor(tenant.id, "system", "bootstrap"), "tenant_create",
                 detail=f"tenant {name!r} created with admin key {key.id}")
    session.commit()
    return tenant, raw


def create_tenant_as(session: Session, caller: Caller, name: str) -> tuple[Tenant, str]:
    if not caller.can_create_tenants:
        audit.record_failure(session, caller.actor, "access_denied", detail="tenant_create")
        raise Forbidden("only the server's bootstrap admin key may create tenants")
    if not name.strip():
        raise InvalidInput("name must not be empty")
    session.commit()
    tenant, raw = create_tenant(session, name.strip())
    begin_write(session)
    audit.record(session, caller.actor, "tenant_create", detail=f"created tenant {tenant.id}")
    session.commit()
    return tenant, raw


def _access_list(grants: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """The stored form of an access list: canonical scopes, NFC refs, no duplicates."""
    if not grants:
        raise InvalidInput("scopes must name at least one scope; leave it out for a key that "
                           "sees the whole tenant")
    stored: list[dict[str, str]] = []
    for scope, ref in grants:
        scope, ref = canonical_scope(scope), unicodedata.normalize("NFC", ref)
        if scope == "tenant" and ref not in (TENANT_REF, ANY_REF):
            raise InvalidInput(f"the tenant (institutional) scope has the one scope_ref "
                               f"'{TENANT_REF}'; use it instead of {ref!r}")
        entry = {"scope": scope, "scope_ref": ref}
        if entry not in stored:
            stored.append(entry)
    return stored


def create_api_key(session: Session, caller: Caller, role: str, name: str, *,
                   scopes: Sequence[tuple[str, str]] | None = None,
                   agent_id: str | None = None,
                   user_id: str | None = None) -> tuple[ApiKey, str]:
    """A new key of the caller's tenant (its secret returned once). Agent keys may carry an
    access list (``scopes``) and an agent id; a user key names its data subject
    (``user_id``), whose memories alone it sees; admin and compliance keys see the whole
    tenant. The subject's id is not written into the audit row (the key's row names it)."""
    with audit.audited(session, caller.actor, "key_create",
                       detail=f"role {role}" if role in ROLES else "role (invalid)",
                       private=(user_id,)):
        if role not in ROLES:
            raise InvalidInput(f"role must be one of {', '.join(ROLES)}")
        if role == "user" and user_id is None:
            raise InvalidInput("a user key belongs to one data subject: send user_id, the "
                               "subject's user id")
        if role != "user" and user_id is not None:
            raise InvalidInput(f"only user keys take a user_id; a {role} key is not a data "
                               f"subject's key, so leave user_id out or use role 'user'")
        if role == "user" and (scopes is not None or agent_id is not None):
            raise InvalidInput("a user key sees its own data subject only: leave scopes and "
                               "agent_id out")
        if role not in ("agent", "user") and (scopes is not None or agent_id is not None):
            raise InvalidInput(f"only agent keys take scopes and an agent_id; a {role} key "
                               f"always sees the whole tenant, so leave both out or use role "
                               f"'agent'")
        stored = _access_list(scopes) if scopes is not None else None
        if user_id is not None:  # the form memories name their subject in
            user_id = nfc(user_id)
            validate_segment(user_id, "user_id", max_chars=MAX_SCOPE_REF_CHARS,
                             max_bytes=MAX_SCOPE_REF_BYTES)
        if agent_id is not None:
            agent_id = unicodedata.normalize("NFC", agent_id)
        raw = new_key()
        session.commit()
        begin_write(session)
        key = _add_key(session, caller.tenant_id, role, name, raw, scopes=stored,
                       agent_id=agent_id, user_id=user_id)
        session.flush()
        audit.record(session, caller.actor, "key_create",
                     detail=f"key {key.id} role {role}"
                            + (" scoped" if stored is not None else ""))
        session.commit()
    return key, raw


def list_api_keys(session: Session, caller: Caller, *,
                  include_revoked: bool = False) -> list[ApiKey]:
    """The caller's tenant's keys, oldest first (their hashes and subjects stay in the
    database: the route shows id, prefix, role, name, scopes, agent, times)."""
    with audit.audited(session, caller.actor, "key_list"):
        query = select(ApiKey).where(ApiKey.tenant_id == caller.tenant_id)
        if not include_revoked:
            query = query.where(ApiKey.revoked_at.is_(None))
        keys = list(session.scalars(query.order_by(ApiKey.created_at, ApiKey.id)))
        session.commit()
        begin_write(session)
        audit.record(session, caller.actor, "key_list", detail=f"{len(keys)} keys")
        session.commit()
    return keys


def revoke_api_key(session: Session, caller: Caller, key_id: uuid.UUID) -> None:
    with audit.audited(session, caller.actor, "key_revoke", detail=f"key {key_id}"):
        session.commit()
        begin_write(session)
        key = session.scalar(select(ApiKey).where(ApiKey.id == key_id,
                                                  ApiKey.tenant_id == caller.tenant_id))
        if key is None or key.revoked_at is not None:
            raise NotFound("no active API key with that id in this tenant")
        key.revoked_at = utcnow()
        audit.record(session, caller.actor, "key_revoke", detail=f"key {key.id}")
        session.commit()
    CALLERS.forget(key.key_sha256)


def ensure_bootstrap(session: Session, admin_key: str | None, *,
                     key_file: Path | None = None) -> str | None:
    """Create the default tenant on first start; returns a newly made admin key to print once.

    With ``admin_key`` set, that key is the bootstrap key (registered if not yet known) and
    nothing is returned. A new ``admin_key`` replaces the previous bootstrap key: every other
    key that may create tenants is revoked in the same transaction, so changing
    MEMPLANE_ADMIN_KEY is how an operator rotates it.

    With ``key_file`` (MEMPLANE_BOOTSTRAP_KEY_FILE), a newly made key is written into that new
    file before the tenant is committed — the caller must not print it. An existing file is
    never overwritten: SecretFileExists, and no tenant is made.
    """
    if admin_key:
        known = session.scalar(select(ApiKey).where(
            ApiKey.key_sha256 == sha256_hex(admin_key.encode())))
        if known is not None:
            session.rollback()
            if known.revoked_at is not None:
                raise RuntimeError("MEMPLANE_ADMIN_KEY is a key that was revoked; choose a new "
                                   "random key of at least 32 characters")
            return None
    first = session.scalar(select(Tenant).order_by(Tenant.created_at).limit(1))
    session.rollback()
    if first is None:
        if admin_key or key_file is None:
            _, raw = create_tenant(session, "default", admin_key=admin_key,
                                   can_create_tenants=True)
            return None if admin_key else raw
        raw = new_key()
        create_secret_file(key_file, raw)  # first: a key the operator never gets is no use
        try:
            create_tenant(session, "default", admin_key=raw, can_create_tenants=True)
        except BaseException:
            session.rollback()
            remove_secret_file(key_file)
            raise
        return raw
    if admin_key:
        begin_write(session)
        previous = session.scalars(select(ApiKey).where(ApiKey.can_create_tenants.is_(True),
                                                        ApiKey.revoked_at.is_(None))).all()
        now = utcnow()
        system = Actor(first.id, "system", "bootstrap")
        for old in previous:
            old.revoked_at = now
            audit.record(session, Actor(old.tenant_id, "system", "bootstrap"),
                         "key_revoke", detail=f"key {old.id} replaced by a new "
                                              f"MEMPLANE_ADMIN_KEY")
        key = _add_key(session, first.id, "admin", "bootstrap admin key (MEMPLANE_ADMIN_KEY)",
                       admin_key, can_create_tenants=True)
        try:
            session.flush()
        except sa_exc.IntegrityError:
            # Another replica starting with the same new key registered it first.
            session.rollback()
            return None
        audit.record(session, system, "key_create", detail=f"key {key.id} role admin bootstrap")
        session.commit()
        for old in previous:
            CALLERS.forget(old.key_sha256)
            # Said once: the next start finds MEMPLANE_ADMIN_KEY registered and revokes nothing.
            log.warning("MEMPLANE_ADMIN_KEY is a new bootstrap admin key: the previous one "
                        "(key id %s, %s) is revoked and no longer works", old.id,
                        "generated at first start" if old.name == "initial admin key"
                        else old.name)
    return None


def whoami(session: Session, caller: Caller) -> WhoAmI:
    """The calling key (``GET /v1/whoami``), audited as ``whoami``."""
    begin_write(session)
    audit.record(session, caller.actor, "whoami", detail=f"key role {caller.role}")
    session.commit()
    return WhoAmI(tenant_id=caller.tenant_id, key_id=caller.key_id, role=caller.role,
                  agent_id=caller.access.agent_id, user_id=caller.access.user_id,
                  scoped=caller.access.scoped, can_create_tenants=caller.can_create_tenants)
