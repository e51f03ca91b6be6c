"""Where a tenant's audit checkpoints live, and how a move of that place is itself anchored.

The database names the tenant's active storage configuration, so it also decides where the
sealer writes checkpoints (``checkpoints.py``). Whoever can write the database could point
that at an empty place — insert an active ``default`` configuration, set ``anchored_seq``
back to 0 — and a ``verify`` that read only the active bucket would find nothing to hold a
rewritten chain to. So the places are not the database's to choose:

- The list of places starts at a root the database cannot move: the operator's default
  bucket at ``tenants/<tenant id>``, where every tenant begins.
- Every checkpoint names the place it was written for (``anchor``: public configuration id,
  storage type, bucket, endpoint, prefix). When the sealer anchors into another place than
  the last one, it first writes a signed *move record* into the old place (into the root if
  the old place no longer takes writes), ``audit/checkpoints/<seq>-moved.json``, naming the
  new place and the chain head at the move (``moved_to``); the first checkpoint in the new
  place names the old one (``moved_from``).
- ``verify`` reads the root, every configuration the tenant has in the database (rows are
  retired, never removed) and every place a move record names, and holds the database's
  chain to all of it. A move record naming a configuration the database no longer has (or
  that no longer describes the same bucket), a checkpoint that continues one in another
  place without a move record, a checkpoint whose predecessor is in none of these places,
  and a database whose record of the last checkpoint is below a signed checkpoint found all
  fail verification. The root, the places move records name and the active configuration
  must be readable; another configuration's bucket that cannot be read (a user-memory bucket
  since removed) is reported in ``anchors_unreadable`` and does not fail it.

Checkpoints written before places were named (no ``anchor`` field) are still held to the
chain, but their moves cannot be checked.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from sqlalchemy import select
from sqlalchemy.orm import Session

from storage_adapters.bounded import ObjectTooLarge

from ..db.models import AuditHead, StorageConfig
from ..errors import InvalidInput
from ..plane.data_plane import (
    DEFAULT,
    DataPlane,
    Target,
    default_config,
    parse_public_id,
    public_id,
)
from ..signing import SigningKey, canonical

FORMAT = "memplane-audit-checkpoint/1"
FOLDER = ("audit", "checkpoints")
SEQ_DIGITS = 20
MOVED_SUFFIX = "-moved"
MOVE_OPERATION = "audit_anchor_moved"
# The target of a place no configuration row names (the root, a default-bucket place a move
# record names): only its adapter and prefix are used.
NO_CONFIG = uuid.UUID(int=0)


CHECKPOINT_READ_CEILING = 1 << 20
"""The most a checkpoint may take from the bucket (one signed JSON object of well under
1 KiB): a larger one is reported as altered, never read whole."""


def checkpoint_name(seq: int, *, moved: bool = False) -> str:
    return f"{seq:0{SEQ_DIGITS}d}{MOVED_SUFFIX if moved else ''}.json"


@dataclass(frozen=True)
class Place:
    """Where checkpoints are written: a bucket (or the operator's) and the prefix in it."""

    storage_type: str
    bucket: str | None
    endpoint: str | None
    prefix: str

    def describe(self, config_id: uuid.UUID | None) -> dict[str, Any]:
        return {"storage_config_id": public_id(config_id) if config_id else None,
                "storage_type": self.storage_type, "bucket": self.bucket,
                "endpoint": self.endpoint, "prefix": self.prefix}


def place_of(config: StorageConfig) -> Place:
    return Place(config.storage_type, config.bucket, config.endpoint, config.prefix)


def root_of(tenant_id: uuid.UUID) -> Place:
    """The operator's default bucket at the tenant's own prefix: where every tenant starts."""
    return place_of(default_config(tenant_id))


def described(value: Any) -> tuple[Place, uuid.UUID | None] | None:
    """The place (and configuration id) a checkpoint's ``anchor``/``moved_*`` names."""
    if not isinstance(value, dict):
        return None
    kind, bucket, endpoint, prefix = (value.get(k) for k in
                                      ("storage_type", "bucket", "endpoint", "prefix"))
    if not (isinstance(kind, str) and isinstance(prefix, str)
            and all(v is None or isinstance(v, str) for v in (bucket, endpoint))):
        return None
    named = value.get("storage_config_id")
    try:
        config_id = parse_public_id(named) if isinstance(named, str) else None
    except InvalidInput:
        return None
    return Place(kind, bucket, endpoint, prefix), config_id


def label(place: Place, config_id: uuid.UUID | None) -> str:
    """How a verification sentence names a place: never a credential, never content."""
    if place.storage_type == DEFAULT:
        return f"the operator's default bucket at {place.prefix!r}"
    return f"storage configuration {public_id(config_id) if config_id else '(unknown)'}"


def previous(session: Session, tenant_id: uuid.UUID,
             anchor_config_id: uuid.UUID | None) -> tuple[Place, uuid.UUID | None]:
    """Where the tenant's last checkpoint was written, as the database remembers it; the
    root when it remembers none (a tenant's first checkpoint)."""
    config = session.get(StorageConfig, anchor_config_id) if anchor_config_id else None
    if config is None or config.tenant_id != tenant_id:
        return root_of(tenant_id), None
    return place_of(config), config.id


def target_of(session: Session, plane: DataPlane, place: Place,
              config_id: uuid.UUID | None) -> Target:
    if place.storage_type == DEFAULT:
        return Target(config_id or NO_CONFIG, place.prefix, plane.default_adapter)
    if config_id is None:
        raise LookupError("a tenant bucket is reached only through its configuration")
    return plane.by_id(session, config_id)


def anchored_target(session: Session, plane: DataPlane, tenant_id: uuid.UUID) -> Target:
    """Where the tenant's log is anchored now: the place of its last checkpoint (the root
    before the first). The tree's checkpoints (``tlog_anchor.py``) go there, and follow the
    tenant's storage elsewhere only once the move is itself a row checkpointed in this place
    (``anchor_moves.py``)."""
    last = session.scalar(select(AuditHead.anchor_config_id)
                          .where(AuditHead.tenant_id == tenant_id))
    return target_of(session, plane, *previous(session, tenant_id, last))


def move_detail(place: Place, config_id: uuid.UUID | None) -> str:
    """The detail of the ``audit_anchor_moved`` row that records the anchor moving there."""
    return f"audit checkpoints move to {label(place, config_id)}"


# -- reading every place ---------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """One checkpoint (or move record) read from a place."""

    seq: int
    moved: bool
    place: Place
    config_id: uuid.UUID | None
    body: dict[str, Any] | None
    problem: str | None

    @property
    def where(self) -> str:
        return label(self.place, self.config_id)


@dataclass
class Survey:
    """Everything read from the tenant's places, and what stopped the reading."""

    found: list[Found] = field(default_factory=list)
    read: dict[Place, uuid.UUID | None] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    problem: str | None = None
    bad: Found | None = None


def survey(session: Session, plane: DataPlane, key: SigningKey, tenant_id: uuid.UUID,
           active_config: uuid.UUID | None, describe_error: Callable[[BaseException], str]
           ) -> Survey:
    """Read the checkpoints of the root, of every configuration the tenant has and of every
    place a move record names. ``describe_error`` turns a failed read into a short code."""
    result = Survey()
    rows = session.scalars(select(StorageConfig).where(StorageConfig.tenant_id == tenant_id)
                           .order_by(StorageConfig.created_at, StorageConfig.id)).all()
    known = {row.id: row for row in rows}
    pending: list[tuple[Place, uuid.UUID | None, bool]] = [(root_of(tenant_id), None, True)]
    for row in rows:
        pending.append((place_of(row), row.id, row.id == active_config))
    while pending:
        place, config_id, required = pending.pop(0)
        if place in result.read:
            continue
        try:
            target = target_of(session, plane, place, config_id)
            session.rollback()  # the bucket is read with no transaction open
            found = _read_all(target, place, config_id, key, tenant_id)
        except Exception as exc:  # noqa: BLE001 - any failure of one bucket is reported
            session.rollback()
            if required:
                result.problem = (f"the checkpoints in {label(place, config_id)} could not "
                                  f"be read ({describe_error(exc)}); retry when the bucket is "
                                  "reachable")
                return result
            result.unreadable.append(label(place, config_id))
            continue
        result.read[place] = config_id
        result.found.extend(found)
        for item in found:
            if not item.moved or item.body is None:
                continue
            named = described(item.body.get("moved_to"))
            if named is None:
                continue
            to_place, to_id = named
            if to_place.storage_type != DEFAULT:
                kept = known.get(to_id) if to_id else None
                if kept is None:
                    result.problem = (
                        f"checkpoint {item.seq} in {item.where} records that the anchor "
                        f"moved to {label(to_place, to_id)}, a storage configuration the "
                        "database no longer has: configurations were removed")
                    result.bad = item
                    return result
                if place_of(kept) != to_place:
                    result.problem = (
                        f"checkpoint {item.seq} in {item.where} records that the anchor "
                        f"moved to {label(to_place, to_id)}, but the database's configuration "
                        "no longer names that bucket: the configuration was changed")
                    result.bad = item
                    return result
            pending.append((to_place, to_id, True))
    result.found.sort(key=lambda f: (f.seq, not f.moved))
    return result


def _read_all(target: Target, place: Place, config_id: uuid.UUID | None, key: SigningKey,
              tenant_id: uuid.UUID) -> list[Found]:
    found = []
    for info in target.adapter.list(target.path(*FOLDER) + "/"):
        name = info.path.rsplit("/", 1)[-1]
        stem = name.removesuffix(".json")
        moved = stem.endswith(MOVED_SUFFIX)
        stem = stem.removesuffix(MOVED_SUFFIX)
        if not (name.endswith(".json") and stem.isdigit()):
            continue
        found.append(_read_one(target, info.path, int(stem), moved, place, config_id, key,
                               tenant_id))
    return found


def _read_one(target: Target, path: str, seq: int, moved: bool, place: Place,
              config_id: uuid.UUID | None, key: SigningKey, tenant_id: uuid.UUID) -> Found:
    def bad(why: str) -> Found:
        return Found(seq, moved, place, config_id, None, f"checkpoint {seq} {why}")

    try:
        body = json.loads(target.adapter.get(path, CHECKPOINT_READ_CEILING),
                          object_pairs_hook=_refuse_duplicates)
    except ObjectTooLarge:
        return bad("in the bucket is larger than any checkpoint this server writes")
    except ValueError:
        return bad("in the bucket is not a well-formed checkpoint")
    if not isinstance(body, dict) or not _signed_by(key, body):
        return bad("in the bucket does not carry a valid signature of this server's "
                   "checkpoint key: it was forged or altered")
    if (body.get("tenant_id") != str(tenant_id) or body.get("seq") != seq
            or ("moved_to" in body) != moved):
        return bad("in the bucket was signed for another tenant or another position")
    return Found(seq, moved, place, config_id, body, None)


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key appears twice")
    return dict(pairs)


def _signed_by(key: SigningKey, body: dict[str, Any]) -> bool:
    signature = body.get("signature")
    if (body.get("format") != FORMAT or body.get("key_id") != key.key_id
            or not isinstance(signature, str)):
        return False
    try:
        key.private.public_key().verify(base64.b64decode(signature, validate=True),
                                        canonical(body))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


# -- how the places link up ------------------------------------------------------------------


def _moves_to(record: Found, place: Place) -> bool:
    named = described(record.body.get("moved_to")) if record.body is not None else None
    return named is not None and named[0] == place


def unlinked(found: Iterable[Found], root: Place,
             ids: Mapping[Place, uuid.UUID | None]) -> tuple[Found, str] | None:
    """The first checkpoint that continues the chain in another place than its predecessor's
    without a signed record of the move, and why; None when every move was recorded."""
    items = [f for f in found if f.body is not None and f.problem is None]
    plain: dict[int, set[Place]] = {}
    moves: dict[int, list[Found]] = {}
    for item in items:
        if item.moved:
            moves.setdefault(item.seq, []).append(item)
        else:
            plain.setdefault(item.seq, set()).add(item.place)
    for item in items:
        assert item.body is not None
        if item.moved or "anchor" not in item.body:
            continue  # a move record, or written before places were named
        prev = item.body.get("prev_seq")
        if not isinstance(prev, int):
            continue
        before = {root} if prev == 0 else plain.get(prev, set())
        if not before or item.place in before:
            continue  # a missing predecessor is the chain check's to report
        came = described(item.body.get("moved_from"))
        recorded = came is not None and came[0] in before and any(
            _moves_to(m, item.place) and m.place in (came[0], root)
            for m in moves.get(item.seq, []))
        if not recorded:
            source = sorted(before, key=repr)[0]
            return item, (
                f"checkpoint {item.seq} in {item.where} continues from "
                f"{'the start of the chain' if prev == 0 else f'checkpoint {prev}'} in "
                f"{label(source, ids.get(source))}, but no signed record of the anchor "
                "moving there was found: the anchor was moved by editing the database")
    return None
