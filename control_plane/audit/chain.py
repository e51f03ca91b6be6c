"""The hash chain's form of an audit row: what the sealer hashes and ``verify`` recomputes
(``service.py`` says how rows are chained)::

    row_hash = SHA-256(prev_hash || canonical(row))
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ..db.models import AccessLog
from ..kit import sha256_hex

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


def chain_hash(prev_hash: str, row: Any) -> str:
    return sha256_hex(prev_hash.encode() + canonical(row))


# The columns a row's hashes are made of, and with its links.
HASHED = (AccessLog.id, AccessLog.tenant_id, AccessLog.seq, AccessLog.pointer_id,
          AccessLog.event_id, AccessLog.accessor_type, AccessLog.accessor_id,
          AccessLog.operation, AccessLog.success, AccessLog.detail, AccessLog.request_id,
          AccessLog.accessed_at, AccessLog.agent_id)
CHAINED = (*HASHED, AccessLog.prev_hash, AccessLog.row_hash)
