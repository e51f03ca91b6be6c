"""The tenant's list of audit-log witnesses: its API shapes, and saving and reading it
(``PUT``/``GET /v1/audit/witnesses``), each audited. Collecting the witnesses' cosignatures
is ``witnesses.py``'s."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated
from urllib.parse import urlsplit

import httpx
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    field_validator,
)
from sqlalchemy import delete
from sqlalchemy.orm import Session

from storage_adapters.netguard import EndpointNotAllowed, EndpointPolicy

from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import AuditWitness
from ..errors import InvalidInput
from ..identity import Actor
from ..kit import PLAIN_TEXT
from ..settings import Settings
from ..tlog import note
from . import service as audit
from .witnesses import MAX_WITNESSES, endpoint_policy, rows

# -- the API's shapes -------------------------------------------------------------------------

WitnessName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                               max_length=200, pattern=PLAIN_TEXT)]
WitnessUrl = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                              max_length=1024)]
VerifierKey = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                               max_length=512)]


EXAMPLE: list[JsonValue] = [{"name": "our witness", "url": "https://witness.example.com",
            "verifier_key": "witness.example.com/w1+1c8e7f3a+BNy2…"}]


class WitnessIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": EXAMPLE})

    name: WitnessName | None = Field(None, description="A label; default: the key's name.")
    url: WitnessUrl = Field(description="The witness's submission prefix: the server POSTs "
                            "to <url>/add-checkpoint.")
    verifier_key: VerifierKey = Field(description="The witness's cosignature verifier key, "
                                      "<name>+<key id>+<base64 key>, as `memplane witness "
                                      "key` prints it.")

    @field_validator("url")
    @classmethod
    def _plain_url(cls, value: str) -> str:
        try:
            parts = urlsplit(value)
            _ = parts.port  # a port out of range or not a number
            httpx.URL(value)
        except (ValueError, httpx.InvalidURL):
            raise ValueError("url is not a valid URL; give one like "
                             "'https://witness.example.com'") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("url must be an http:// or https:// URL with a host")
        if parts.username is not None or parts.password is not None:
            raise ValueError("url must not carry a user name or password")
        if parts.query or parts.fragment or any(c.isspace() for c in value):
            raise ValueError("url must not carry a query, a fragment or spaces")
        return value.rstrip("/")

    @field_validator("verifier_key")
    @classmethod
    def _cosignature_key(cls, value: str) -> str:
        try:
            key = note.parse_verifier(value)
        except note.NoteError as exc:
            raise ValueError(f"verifier_key: {exc}") from None
        if key.kind != note.COSIGNATURE:
            raise ValueError("verifier_key must be a witness's cosignature key (type 0x04), "
                             "as `memplane witness key` prints it, not a log's signing key")
        return key.text()


class WitnessOut(BaseModel):
    name: str = Field(description="The label (default: the key's name).")
    url: str = Field(description="The submission prefix.")
    verifier_key: str = Field(description="The cosignature verifier key.")
    cosigned_size: int = Field(description="The tree size this witness last cosigned (or "
                               "said it holds, answering 409); 0 before its first.")
    last_status: str | None = Field(description="The outcome of the last request, a generic "
                                    "code: cosigned, conflict, proof_refused, log_key_refused, "
                                    "origin_unknown, request_refused, refused, witness_error, "
                                    "bad_cosignature, timeout, unreachable, "
                                    "endpoint_not_allowed; null before the first.")
    last_attempt_at: datetime | None = Field(description="When it was last asked.")


class WitnessesOut(BaseModel):
    witnesses: list[WitnessOut] = Field(description="The tenant's witnesses, in its order.")


# -- registering ------------------------------------------------------------------------------


def refuse_endpoint(policy: EndpointPolicy, url: str) -> None:
    """Refuse a witness URL the guard would refuse at connect time (InvalidInput)."""
    parts = urlsplit(url)
    try:
        host = policy.check_endpoint(url)
        try:
            literal = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        if literal is not None:
            found = [literal]
        else:
            infos = socket.getaddrinfo(host, parts.port or 443, 0, socket.SOCK_STREAM)
            found = [ipaddress.ip_address(str(i[4][0]).split("%")[0]) for i in infos]
        if not any(policy.address_allowed(a) for a in found):
            raise EndpointNotAllowed(host)
    except EndpointNotAllowed:
        raise InvalidInput(
            f"the witness at {parts.hostname} is not allowed on this server: use a public "
            "address, or ask the operator to list its network in MEMPLANE_ALLOWED_ENDPOINTS "
            "(loopback, private, link-local and metadata addresses are refused); nothing was "
            "saved", problem="endpoint_not_allowed") from None
    except (OSError, UnicodeError, ValueError):
        raise InvalidInput(f"the witness host {parts.hostname} does not resolve; nothing was "
                           "saved", problem="unresolvable") from None


def register(session: Session, settings: Settings, actor: Actor,
             witnesses: Sequence[WitnessIn]) -> WitnessesOut:
    """Make ``witnesses`` the tenant's list (replacing the last one). A witness whose key was
    already listed keeps what the server knows of it (its cosigned size)."""
    hosts = " ".join(sorted({urlsplit(w.url).hostname or "" for w in witnesses}))
    with audit.audited(session, actor, "audit_witnesses_write",
                       detail=f"{len(witnesses)} witnesses {hosts}".strip()):
        if len(witnesses) > MAX_WITNESSES:
            raise InvalidInput(f"at most {MAX_WITNESSES} witnesses; nothing was saved",
                               problem="too_many_witnesses")
        if len({w.verifier_key for w in witnesses}) != len(witnesses):
            raise InvalidInput("a verifier key is listed twice; nothing was saved",
                               problem="duplicate_witness")
        session.commit()  # no transaction stays open while names resolve
        policy = endpoint_policy(settings)
        for witness in witnesses:
            refuse_endpoint(policy, witness.url)
        begin_write(session)
        known = {row.verifier_key: (row.cosigned_size, row.last_status, row.last_attempt_at)
                 for row in rows(session, actor.tenant_id)}
        session.execute(delete(AuditWitness).where(AuditWitness.tenant_id == actor.tenant_id)
                        .execution_options(synchronize_session=False))
        session.expunge_all()
        now = utcnow()
        for position, witness in enumerate(witnesses):
            size, status, attempted = known.get(witness.verifier_key, (0, None, None))
            session.add(AuditWitness(
                tenant_id=actor.tenant_id, position=position,
                name=witness.name or note.parse_verifier(witness.verifier_key).name,
                url=witness.url, verifier_key=witness.verifier_key, created_at=now,
                cosigned_size=size, last_status=status, last_attempt_at=attempted))
        listed = "; ".join(f"{urlsplit(w.url).hostname} key "
                           f"{note.parse_verifier(w.verifier_key).id.hex()}" for w in witnesses)
        audit.record(session, actor, "audit_witnesses_write",
                     detail=f"{len(witnesses)} witnesses: {listed}" if witnesses
                     else "0 witnesses")
        session.commit()
    return listing(session, actor, audited=False)


def listing(session: Session, actor: Actor, *, audited: bool = True) -> WitnessesOut:
    found = rows(session, actor.tenant_id)
    out = WitnessesOut(witnesses=[_out(row) for row in found])
    session.commit()
    if audited:
        begin_write(session)
        audit.record(session, actor, "audit_witnesses_read", detail=f"{len(found)} witnesses")
        session.commit()
    return out


def _out(row: AuditWitness) -> WitnessOut:
    return WitnessOut(name=row.name, url=row.url, verifier_key=row.verifier_key,
                      cosigned_size=row.cosigned_size, last_status=row.last_status,
                      last_attempt_at=row.last_attempt_at)


