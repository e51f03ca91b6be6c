"""A batch's gets, side by side: the single read (``read.get_value``) with its per-item
waits gathered.

Every get alone at its address has its pointer read by one statement for the whole batch.
On PostgreSQL that statement also appends the read audit row of every get whose subject key
the server already knows (``READ_MANY_LOGGED``, the batch form of the single read's one
statement): committed with the lookup, before anything is fetched (I6); on SQLite it is
``hotpath.lookup_many_for_read``, which writes nothing. For each live one the
objects are fetched concurrently on the batches' shared pool; decryption and the SHA-256
check (I3) run in the request's thread; then the read audit rows of every verified item not
logged by the lookup are ONE insert committed on its own, before any value is answered.
Whatever is not plainly live and verified — no pointer, expired, marked corrupt, a fetch that
failed, an object that does not open or match — is left to the single-request protocol,
which answers, marks and audits it exactly as a lone read would (after its row went in with
the lookup, as a lone read does after its one statement).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Uuid, bindparam, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from storage_adapters import envelope
from storage_adapters.envelope import DecryptionError

from ..addresses import MemoryAddress
from ..audit import service as audit
from ..db import direct
from ..db.base import utcnow
from ..errors import DomainError, InvalidInput, NotFound
from ..identity import Actor
from ..keys import repository as keys_repo
from ..keys import subject_keys as keys
from ..kit import request_id_var, sha256_hex
from ..plane.data_plane import DataPlane, Target, storage_errors
from . import hotpath, listing
from .batch_sets import fetch_all
from .listing import LiveKey
from .read import Listed, MemoryValue, check_live, live_key, read_pointer
from .schemas import pointer_json
from .shared import guessed_key, keyring_of, read_key, remember_key, sealed_address

log = logging.getLogger(__name__)

Looked = Mapping[MemoryAddress, tuple[Any, hotpath.KeyRow | None]]


@dataclass(frozen=True)
class GetItem:
    index: int
    address: MemoryAddress


@dataclass(frozen=True)
class _Ready:
    item: GetItem
    found: tuple[Any, hotpath.KeyRow | None]
    target: Target
    detail: str  # the audit row's: the scope and the address sealed under the subject key
    # ("" when the lookup already wrote the row)


# The single read's one statement (hotpath.READ_LOGGED_POSTGRES) for a whole batch: the
# addresses, the key each get guessed and its sealed audit detail travel as arrays, so the
# statement's text never changes (compiled once, prepared by the driver) whatever the size.
# Each address and its subject's live key are looked up on their own (LATERAL … LIMIT 1,
# which the planner does not fold into a join; both are unique): a join with the array was
# planned as a scan of all the tenant's pointers.
READ_MANY_LOGGED = text(f"""
WITH req AS (
 SELECT * FROM unnest(CAST(:v_scopes AS text[]), CAST(:v_refs AS text[]),
  CAST(:v_keys AS text[]), CAST(:v_expected AS uuid[]), CAST(:v_loggable AS boolean[]),
  CAST(:v_details AS text[])) AS r(scope_type, scope_ref, key, expected_key, loggable, detail)
), found AS (
 SELECT p.*, k.id AS key_id, k.wrapped_key, k.kek_version_id,
  r.expected_key AS req_expected_key, r.loggable AS req_loggable, r.detail AS req_detail
 FROM req AS r CROSS JOIN LATERAL (
  SELECT * FROM memory_pointers AS m
  WHERE m.tenant_id = :v_tenant AND m.scope_type = r.scope_type
   AND m.scope_ref = r.scope_ref AND m.key = r.key
  LIMIT 1) AS p
 LEFT JOIN LATERAL (
  SELECT s.id, s.wrapped_key, s.kek_version_id FROM subject_keys AS s
  WHERE {hotpath.live_key_of("s", "p")}
  LIMIT 1) AS k ON true
), aud AS (
 INSERT INTO access_logs (tenant_id, pointer_id, accessor_type, accessor_id, agent_id,
  operation, success, detail, request_id, accessed_at)
 SELECT :v_tenant, found.id, :v_accessor_type, :v_accessor_id, :v_accessor_agent, 'read', true,
  found.req_detail, :v_request_id, :v_now
 FROM found
 WHERE found.req_loggable
  AND found.key_id IS NOT DISTINCT FROM found.req_expected_key
  AND found.sync_status = 'synced'
  AND (found.expires_at IS NULL OR found.expires_at > CAST(:v_now AS timestamptz))
 RETURNING pointer_id
)
SELECT found.*, found.id IN (SELECT pointer_id FROM aud) AS logged FROM found
""").bindparams(bindparam("v_tenant", type_=Uuid))


def lookup(session: Session, plane: DataPlane, actor: Actor, items: list[GetItem],
           ) -> tuple[dict[MemoryAddress, tuple[Any, hotpath.KeyRow | None]], set[MemoryAddress]]:
    """The batch's one lookup: each address's pointer and live key (absent: no pointer), and
    the addresses whose read row the lookup itself appended (PostgreSQL, when the server
    knows the subject's key from an earlier read or write of the address and still holds it
    unwrapped: the row's detail is sealed under it before the statement runs)."""
    if not items:
        return {}, set()
    if session.get_bind().dialect.name != "postgresql" or plane.audit_batcher is None:
        return hotpath.lookup_many_for_read(session, actor.tenant_id,
                                            [item.address for item in items]), set()
    expected: list[Any] = []
    loggable: list[bool] = []
    details: list[str] = []
    for item in items:
        known, guess, handle = guessed_key(plane, actor.tenant_id, item.address)
        expected.append(guess)
        loggable.append(known)
        details.append(item.address.scope + sealed_address(actor, item.address, handle)
                       if known else "")
    if session.in_transaction():
        session.commit()
    rows = direct.run(session.get_bind().engine, READ_MANY_LOGGED, {
        "v_tenant": actor.tenant_id,
        "v_scopes": [item.address.scope for item in items],
        "v_refs": [item.address.scope_ref for item in items],
        "v_keys": [item.address.key for item in items],
        "v_expected": expected, "v_loggable": loggable, "v_details": details,
        "v_accessor_type": actor.accessor_type, "v_accessor_id": actor.accessor_id,
        "v_accessor_agent": actor.agent_id, "v_request_id": request_id_var.get(),
        "v_now": utcnow()})
    found: dict[MemoryAddress, tuple[Any, hotpath.KeyRow | None]] = {}
    logged: set[MemoryAddress] = set()
    for row in rows:
        address = MemoryAddress(row.scope_type, row.scope_ref, row.key)
        live = None if row.key_id is None else hotpath.KeyRow(
            row.key_id, "", "", bytes(row.wrapped_key), row.kek_version_id)
        found[address] = (hotpath.pointer_of(row), live)
        if row.logged:
            logged.add(address)
    return found, logged


def read_gets(session: Session, plane: DataPlane, actor: Actor, items: list[GetItem],
              looked: Looked, logged: set[MemoryAddress] | frozenset[MemoryAddress] = frozenset(),
              ) -> tuple[dict[int, dict[str, Any]], list[GetItem]]:
    """The answers of the gets read here, by index, and the gets the single-request
    protocol must run. ``looked``: the batch's one lookup; ``logged``: the addresses whose
    read row it appended."""
    if plane.audit_batcher is None:
        return {}, items
    general: list[GetItem] = []
    ready: list[_Ready] = []
    for item in items:
        found = looked.get(item.address)
        try:
            pointer = check_live(found[0] if found else None, item.address)
        except DomainError:
            general.append(item)
            continue
        assert found is not None
        if pointer.sync_status != "synced":
            general.append(item)
            continue
        target = plane.by_id(session, pointer.storage_config_id)
        detail = ""  # a logged get's row is in; the others' rows name the address sealed
        if item.address not in logged:
            detail = item.address.scope + sealed_address(
                actor, item.address, read_key(session, plane, actor, found[1]))
        ready.append(_Ready(item, found, target, detail))
    session.commit()

    def fetch(entry: _Ready) -> bytes | None:
        pointer = entry.found[0]
        try:
            with storage_errors(pointer.id):
                return entry.target.adapter.get(pointer.storage_path,
                                                envelope.sealed_size(pointer.content_size))
        except Exception:  # the single read fetches again and answers for it
            return None

    verified: list[tuple[_Ready, Any]] = []
    blobs = fetch_all(plane, actor.tenant_id, fetch, ready,
                      [entry.target.adapter for entry in ready])
    for entry, blob in zip(ready, blobs, strict=True):
        value = None if blob is None else _open(session, plane, actor, entry, blob)
        if value is None:
            general.append(entry.item)
        else:
            verified.append((entry, value[0]))
    session.commit()
    answers = {e.item.index: _answer(e, value) for e, value in verified
               if e.item.address in logged}
    unlogged = [(e, value) for e, value in verified if e.item.address not in logged]
    if not unlogged:
        return answers, general
    try:
        plane.audit_batcher.record_many(actor.tenant_id, actor.accessor_type,
                                        actor.accessor_id, "read",
                                        [(e.found[0].id, e.detail) for e, _ in unlogged],
                                        agent_id=actor.agent_id)
    except Exception as exc:  # no row, no content (I6): each get answers the failure
        unreachable = isinstance(exc, sa_exc.OperationalError)
        if not unreachable:
            log.exception("a batch's read audit rows failed")
        failure = ({"status": 503, "error": "database_unavailable",
                    "detail": "the control-plane database is unreachable; retry later"}
                   if unreachable else
                   {"status": 500, "error": "internal_error",
                    "detail": "this operation failed on the server; retry it, and report it "
                              "if it keeps failing"})
        return answers | {e.item.index: {"index": e.item.index, "op": "get"} | failure
                          for e, _ in unlogged}, general
    for entry, _ in unlogged:  # the next read of the address can log in its lookup
        live = entry.found[1]
        remember_key(actor.tenant_id, entry.item.address, live.id if live is not None else None)
    return answers | {e.item.index: _answer(e, value) for e, value in unlogged}, general


def _answer(entry: _Ready, value: Any) -> dict[str, Any]:
    return {"index": entry.item.index, "op": "get", "status": 200, "value": value,
            "pointer": pointer_json(entry.found[0])}


def _open(session: Session, plane: DataPlane, actor: Actor, entry: _Ready,
          blob: bytes) -> tuple[Any] | None:
    pointer, live = entry.found
    return _verified(session, plane, actor, pointer, blob, live_key(live))


def read_pointers(session: Session, plane: DataPlane, actor: Actor,
                  pointers: list[Any], *, skip_missing: bool = False,
                  keys: Mapping[Any, LiveKey] | None = None) -> list[MemoryValue]:
    """``read.read_pointer`` for several pointers (a listing's items; the caller writes the
    audit rows), through ``read_each``: the first failure raises as a read does; with
    ``skip_missing``, one deleted meanwhile (404) is left out instead."""
    values = []
    for got in read_each(session, plane, actor, pointers, keys=keys):
        if isinstance(got, NotFound) and skip_missing:
            continue
        if isinstance(got, DomainError):
            raise got
        values.append(got)
    return values


def read_each(session: Session, plane: DataPlane, actor: Actor, pointers: list[Any], *,
              keys: Mapping[Any, LiveKey] | None = None) -> list[MemoryValue | DomainError]:
    """Each pointer's verified value, or the error its read raised: the objects fetched
    side by side, each subject key looked up once (unless ``keys``, the live keys by id, has
    it), each value decrypted and hash-verified here. One that is missing, fails to open or
    does not match its hash is read again by ``read.read_pointer``, which marks and audits
    it as a read does (404 when deleted meanwhile, 409 hash_mismatch when corrupt)."""
    targets = {cid: plane.by_id(session, cid) for cid in {p.storage_config_id for p in pointers}}
    session.commit()

    def fetch(pointer: Any) -> bytes | None:
        try:
            with storage_errors(pointer.id):
                return targets[pointer.storage_config_id].adapter.get(
                    pointer.storage_path, envelope.sealed_size(pointer.content_size))
        except Exception:  # read_pointer fetches again and answers for it
            return None

    blobs = fetch_all(plane, actor.tenant_id, fetch, pointers,
                      [t.adapter for t in targets.values()])
    key_ids = [_key_id(blob) for blob in blobs]
    live: dict[Any, LiveKey | None] = dict(keys or {})
    for wanted in dict.fromkeys(k for k in key_ids if k is not None and k not in live):
        row = keys_repo.subject_key(session, actor.tenant_id, wanted)
        live[wanted] = (None if row is None or row.wrapped_key is None else
                        (row.id, row.wrapped_key, row.kek_version_id))
    values: list[MemoryValue | DomainError] = []
    for pointer, blob, found in zip(pointers, blobs, key_ids, strict=True):
        opened = None if blob is None else _verified(session, plane, actor, pointer, blob,
                                                     live.get(found))
        if opened is not None:
            values.append(MemoryValue(opened[0], pointer))
            continue
        try:
            values.append(read_pointer(session, plane, actor, pointer))
        except DomainError as exc:
            values.append(exc)
    if session.in_transaction():
        session.commit()
    return values


def _key_id(blob: bytes | None) -> Any:
    """The id of the subject key an object names in its envelope header, if it has one."""
    if blob is None or not envelope.is_envelope(blob):
        return None
    try:
        return envelope.read_header(blob).key_id
    except DecryptionError:
        return None  # the read that follows fails to open it and answers for it


# A page with values reads an object per item: fewer items than a page of pointers.
MAX_VALUES_PAGE = 100


def check_values_page(limit: int | None) -> None:
    """422 when a page with values would be longer than ``MAX_VALUES_PAGE``."""
    if limit is not None and limit > MAX_VALUES_PAGE:
        raise InvalidInput(f"with include_values, limit must be between 1 and "
                           f"{MAX_VALUES_PAGE}; ask for a smaller page")


def listed_values(session: Session, plane: DataPlane, actor: Actor,
                  page: Listed) -> list[MemoryValue]:
    """A listing's memories with their values (``GET /v1/pointers?include_values=true``):
    read side by side and verified as a read is (``read_pointers``, with the live keys the
    listing found; one deleted meanwhile is left out), each read's audit row committed
    before the answer (I6): with the page, or else here in one insert."""
    values = read_pointers(session, plane, actor, page.pointers, skip_missing=True,
                           keys=page.keys)
    if not page.reads_logged:
        audit.commit_reads(session, plane, actor, [
            ("read", v.pointer.id, v.pointer.scope_type + listing.READ_DETAIL)
            for v in values])
    return values


def _verified(session: Session, plane: DataPlane, actor: Actor, pointer: Any, blob: bytes,
              key: tuple[Any, bytes, Any] | None) -> tuple[Any] | None:
    """The verified value (in a 1-tuple: it may be null), or None when the object does not
    open or match its hash. ``key``: its live subject key as a lookup found it, if any."""
    try:
        data = keys.open_object(session, keyring_of(plane), actor.tenant_id,
                                pointer.storage_path, pointer.id, blob, key)
    except DecryptionError:
        return None
    if sha256_hex(data) != pointer.content_sha256:
        return None
    return (json.loads(data),)
