"""The bytes of the search index's objects (sealed before they reach the bucket).

A vector object (beside its memory's content, ``<content path>.vec``) and a segment
(``<scope dir>/@search/<id>.seg``, a snapshot or a delta of a scope) share one layout:
``MPVX`` + a 4-byte big-endian header length + a JSON header + a float32 matrix (rows x dim,
little-endian). The header names the embedder and, per row, the pointer id, the pointer
version the vector was made for and the text it was made from (the keyword score needs it).

A segment's header may list **parts** (``parts``: their sizes in bytes): objects of this
same layout, each holding the rows of one data subject sealed under that subject's key, that
follow the segment's own sealed bytes in its object (``search/parts.py``), so destroying the
key makes those rows unreadable in every copy of the segment (DESIGN §12).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_MAGIC = b"MPVX"


class CorruptIndexObject(ValueError):
    """An index object that does not parse (written by something else, or truncated)."""


@dataclass
class Rows:
    model: str
    ids: list[uuid.UUID]
    versions: list[int]
    texts: list[str]
    vectors: np.ndarray  # float32 (n, dim)
    # Each row's data subject (the pointer's ``subject_user_id``), where the writer knows
    # them; never encoded.
    subjects: list[str | None] | None = None


def encode(rows: Rows, parts: Sequence[int] = ()) -> bytes:
    fields: dict[str, object] = {
        "model": rows.model, "dim": int(rows.vectors.shape[1]) if rows.vectors.ndim == 2 else 0,
        "ids": [i.hex for i in rows.ids], "versions": rows.versions, "texts": rows.texts,
    }
    if parts:
        fields["parts"] = [int(n) for n in parts]
    header = json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode()
    matrix = np.ascontiguousarray(rows.vectors, dtype="<f4")
    return _MAGIC + len(header).to_bytes(4, "big") + header + matrix.tobytes()


def decode(data: bytes) -> Rows:
    return split(data)[0]


def split(data: bytes) -> tuple[Rows, list[int]]:
    """The rows an object holds, and the sizes of the parts it lists."""
    if data[:4] != _MAGIC or len(data) < 8:
        raise CorruptIndexObject("not a memplane search index object")
    size = int.from_bytes(data[4:8], "big")
    try:
        header = json.loads(data[8:8 + size])
        ids = [uuid.UUID(hex=h) for h in header["ids"]]
        dim = int(header["dim"])
        sizes = [int(n) for n in header.get("parts", [])]
        if sizes and min(sizes) <= 0:
            raise ValueError("a part of no size")
        matrix = np.frombuffer(data[8 + size:], dtype="<f4").astype(np.float32)
        vectors = matrix.reshape(len(ids), dim) if ids else np.zeros((0, dim), np.float32)
        return Rows(str(header["model"]), ids, [int(v) for v in header["versions"]],
                    [str(t) for t in header["texts"]], vectors), sizes
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptIndexObject(f"search index object does not parse: {exc}") from None


def take(rows: Rows, index: Sequence[int]) -> Rows:
    """Those of ``rows`` at ``index``, in that order."""
    dim = int(rows.vectors.shape[1]) if rows.vectors.ndim == 2 else 0
    if len(index) == len(rows.ids):
        return rows  # all of them, in order (a scope whose rows have one key)
    return Rows(rows.model, [rows.ids[i] for i in index], [rows.versions[i] for i in index],
                [rows.texts[i] for i in index],
                rows.vectors[list(index)] if index else np.zeros((0, dim), np.float32))


def join(parts: Sequence[Rows]) -> Rows:
    """One ``Rows`` of several of one model, in order."""
    first = parts[0]
    if len(parts) == 1:
        return first
    return Rows(first.model, [i for p in parts for i in p.ids],
                [v for p in parts for v in p.versions], [t for p in parts for t in p.texts],
                np.vstack([p.vectors for p in parts]).astype(np.float32))
