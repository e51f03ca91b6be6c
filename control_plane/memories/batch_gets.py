"""A batch's gets, side by side: the single read (``read.get_value``) with its per-item
waits gathered.

Every get alone at its address has its pointer read by one statement for the whole batch
(``hotpath.lookup_many_for_read``). For each live one the objects are fetched concurrently
on the batches' shared pool; decryption and the SHA-256 check (I3) run in the request's
thread; then the read audit rows of every verified item are ONE insert committed on its
own, before any value is answered (I6). Whatever is not plainly live and verified — no
pointer, expired, marked corrupt, a fetch that failed, an object that does not open or
match — is left to the single-request protocol, which answers, marks and audits it exactly
as a lone read would.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from storage_adapters.envelope import DecryptionError

from ..audit.service import Actor
from ..errors import DomainError
from ..keys import service as keys
from ..kit import sha256_hex
from ..storage_config.plane import DataPlane, Target, storage_errors
from . import hotpath
from .addresses import MemoryAddress
from .batch_sets import side_by_side
from .read import check_live, live_key
from .schemas import PointerOut
from .shared import keyring_of, read_key, sealed_address

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


def read_gets(session: Session, plane: DataPlane, actor: Actor, items: list[GetItem],
              looked: Looked) -> tuple[dict[int, dict[str, Any]], list[GetItem]]:
    """The answers of the gets read here, by index, and the gets the single-request
    protocol must run. ``looked``: the batch's one lookup."""
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
        handle = read_key(session, plane, actor, found[1])
        ready.append(_Ready(item, found, target, item.address.scope
                            + sealed_address(actor, item.address, handle)))
    session.commit()

    def fetch(entry: _Ready) -> bytes | None:
        pointer = entry.found[0]
        try:
            with storage_errors(pointer.id):
                return entry.target.adapter.get(pointer.storage_path)
        except Exception:  # the single read fetches again and answers for it
            return None

    verified: list[tuple[_Ready, Any]] = []
    for entry, blob in zip(ready, side_by_side(fetch, ready), strict=True):
        value = None if blob is None else _open(session, plane, actor, entry, blob)
        if value is None:
            general.append(entry.item)
        else:
            verified.append((entry, value[0]))
    session.commit()
    if not verified:
        return {}, general
    try:
        plane.audit_batcher.record_many(actor.tenant_id, actor.accessor_type,
                                        actor.accessor_id, "read",
                                        [(e.found[0].id, e.detail) for e, _ in verified],
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
        return {e.item.index: {"index": e.item.index, "op": "get"} | failure
                for e, _ in verified}, general
    return {e.item.index: {"index": e.item.index, "op": "get", "status": 200, "value": value,
                           "pointer": PointerOut.of(e.found[0]).model_dump(mode="json")}
            for e, value in verified}, general


def _open(session: Session, plane: DataPlane, actor: Actor, entry: _Ready,
          blob: bytes) -> tuple[Any] | None:
    """The verified value (in a 1-tuple: it may be null), or None when the object does not
    open or match its hash."""
    pointer, live = entry.found
    try:
        data = keys.open_object(session, keyring_of(plane), actor.tenant_id,
                                pointer.storage_path, pointer.id, blob, live_key(live))
    except DecryptionError:
        return None
    if sha256_hex(data) != pointer.content_sha256:
        return None
    return (json.loads(data),)
