"""The leaves of the audit log's Merkle tree (``tree.py``): one per sealed row, leaf index
``seq − 1``.

A row's leaf input is the canonical JSON object of its own fields — the fields ``GET
/v1/audit`` shows for the row, plus ``tenant_id`` — with keys sorted, no whitespace, UTF-8
(non-ASCII characters as themselves, as ``json.dumps(..., sort_keys=True, separators=(",",
":"), ensure_ascii=False)`` writes them)::

    {"accessed_at":"2026-12-05T13:42:25.123456Z","accessor_id":"key:…","accessor_type":"api",
     "agent_id":null,"detail":"…","event_id":null,"operation":"write",
     "pointer_id":"6f1c…-…","request_id":"…","seq":7,"success":true,"tenant_id":"…"}

Every value has the form the API item shows: ``seq`` an integer, ``success`` a boolean,
ids as hyphenated lower-case UUIDs, ``accessed_at`` in UTC as ``YYYY-MM-DDTHH:MM:SS`` with
``.ffffff`` unless its microseconds are zero, then ``Z``; a missing value is ``null`` (every
key is always there). One exception: ``detail`` is the detail as stored, so an address
sealed under a data subject's key (``sealed.py``) is its ``sealed:…`` token here, which the
item shows opened while the key lives. That is what keeps the leaf — and so the tree — the
same after the subject's erasure.

The leaf hash is SHA-256(0x00 ‖ leaf) (``control_plane.tlog.merkle.leaf_hash``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

_STRING = json.encoder.encode_basestring  # a str as json.dumps(..., ensure_ascii=False) writes it


def _text(value: Any) -> str:
    if value is None:
        return "null"
    return _STRING(value if value.__class__ is str else str(value))


def timestamp(value: datetime) -> str:
    """``accessed_at`` as the API shows it (pydantic's JSON form of an aware UTC datetime)."""
    if value.tzinfo is not None and value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return f"{value.replace(tzinfo=None).isoformat()}Z"


def leaf_bytes(row: Any, seq: int | None = None) -> bytes:
    """The leaf input of an audit row (an AccessLog or a row of its columns); ``seq`` stands
    in for the row's own when given (the sealer numbers rows as it hashes them). Built piece
    by piece, byte for byte what ``json.dumps`` writes for the object (the sealer builds one
    per row beside the requests; ``json.dumps`` cost about twice this)."""
    order = row.seq if seq is None else seq
    if order.__class__ is not int:
        raise ValueError("an unsealed row has no leaf")
    return (
        f'{{"accessed_at":"{timestamp(row.accessed_at)}",'
        f'"accessor_id":{_text(row.accessor_id)},'
        f'"accessor_type":{_text(row.accessor_type)},'
        f'"agent_id":{_text(row.agent_id)},'
        f'"detail":{_text(row.detail)},'
        f'"event_id":{_text(row.event_id)},'
        f'"operation":{_text(row.operation)},'
        f'"pointer_id":{_text(row.pointer_id)},'
        f'"request_id":{_text(row.request_id)},'
        f'"seq":{order},'
        f'"success":{"true" if row.success else "false"},'
        f'"tenant_id":{_text(row.tenant_id)}}}'
    ).encode()


def fields(row: Any, seq: int | None = None) -> dict[str, Any]:
    """The leaf's fields as a JSON object's values (what ``leaf_bytes`` encodes); for tests
    and for readers who rebuild a leaf with a JSON library."""
    order = row.seq if seq is None else seq
    return {
        "accessed_at": timestamp(row.accessed_at), "accessor_id": row.accessor_id,
        "accessor_type": row.accessor_type, "agent_id": row.agent_id, "detail": row.detail,
        "event_id": None if row.event_id is None else str(row.event_id),
        "operation": row.operation,
        "pointer_id": None if row.pointer_id is None else str(row.pointer_id),
        "request_id": row.request_id, "seq": order, "success": bool(row.success),
        "tenant_id": str(row.tenant_id)}
