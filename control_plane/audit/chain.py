"""The hash chain's form of an audit row: what the sealer hashes and ``verify`` recomputes
(``service.py`` says how rows are chained)::

    row_hash = SHA-256(prev_hash || canonical(row))
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ..db.models import AccessLog
from ..kit import sha256_hex
from .leaves import timestamp

GENESIS = "0" * 64


def canonical(row: Any, seq: int | None = None) -> bytes:
    """The hashed form of a row (an AccessLog or a row of its columns), ``seq`` if given
    standing in for the row's own: the JSON array ``json.dumps(fields, separators=(",",
    ":"), ensure_ascii=False)`` writes for its fields, built here piece by piece, byte for
    byte the same (the sealer hashes every audit row inside the server, beside the requests;
    json.dumps cost twice this)."""
    order = row.seq if seq is None else seq
    pointer_id, event_id, agent_id = row.pointer_id, row.event_id, row.agent_id
    parts = [
        _json_text(str(row.tenant_id)),
        str(order) if order.__class__ is int else _json_text(order),
        _json_text(str(pointer_id)) if pointer_id else "null",
        _json_text(str(event_id)) if event_id else "null",
        _json_text(row.accessor_type), _json_text(row.accessor_id), _json_text(row.operation),
        "true" if row.success else "false",
        _json_text(row.detail), _json_text(row.request_id),
        _json_text(_ts(row.accessed_at)),
    ]
    if agent_id is not None:  # only agent keys' rows carry it; older rows hash as before
        parts.append(_json_text(agent_id))
    return f"[{','.join(parts)}]".encode()


_STRING = json.encoder.encode_basestring  # a str as json.dumps(..., ensure_ascii=False) writes it


def _json_text(value: Any) -> str:
    if value is None:
        return "null"
    if value.__class__ is str:
        return _STRING(value)
    return _json_scalar(value)


def _json_scalar(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _ts(value: datetime) -> str:
    if value.year >= 1000:  # isoformat pads the year to four digits; strftime may not
        return f"{value.isoformat(timespec='microseconds')[:26]}Z"
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sealed_forms(row: Any, seq: int) -> tuple[bytes, bytes]:
    """``(canonical(row, seq), leaves.leaf_bytes(row, seq))``, made together, each field
    escaped once: the sealer makes both for every row (tests hold them byte for byte to the
    two functions)."""
    tenant, accessor_type, accessor_id, operation, detail, request_id, agent = (
        _json_text(str(row.tenant_id)), _json_text(row.accessor_type),
        _json_text(row.accessor_id), _json_text(row.operation), _json_text(row.detail),
        _json_text(row.request_id), _json_text(row.agent_id))
    pointer = _json_text(str(row.pointer_id)) if row.pointer_id else "null"
    event = _json_text(str(row.event_id)) if row.event_id else "null"
    success = "true" if row.success else "false"
    at = row.accessed_at
    micro = _ts(at)
    if at.tzinfo is not UTC or at.year < 1000:
        shown = timestamp(at)
    else:
        shown = micro if at.microsecond else f"{micro[:19]}Z"
    chained = (f"[{tenant},{seq},{pointer},{event},{accessor_type},{accessor_id},"
               f"{operation},{success},{detail},{request_id},\"{micro}\""
               f"{'' if row.agent_id is None else ',' + agent}]")
    leaf = (f'{{"accessed_at":"{shown}","accessor_id":{accessor_id},'
            f'"accessor_type":{accessor_type},"agent_id":{agent},"detail":{detail},'
            f'"event_id":{event},"operation":{operation},"pointer_id":{pointer},'
            f'"request_id":{request_id},"seq":{seq},"success":{success},'
            f'"tenant_id":{tenant}}}')
    return chained.encode(), leaf.encode()


def chain_hash(prev_hash: str, row: Any) -> str:
    return sha256_hex(prev_hash.encode() + canonical(row))


# The columns a row's hashes are made of, and with its links.
HASHED = (AccessLog.id, AccessLog.tenant_id, AccessLog.seq, AccessLog.pointer_id,
          AccessLog.event_id, AccessLog.accessor_type, AccessLog.accessor_id,
          AccessLog.operation, AccessLog.success, AccessLog.detail, AccessLog.request_id,
          AccessLog.accessed_at, AccessLog.agent_id)
CHAINED = (*HASHED, AccessLog.prev_hash, AccessLog.row_hash)
