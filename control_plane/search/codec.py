"""The bytes of the search index's objects (sealed before they reach the bucket).

A vector object (beside its memory's content, ``<content path>.vec``) and a segment
(``<scope dir>/@search/<id>.seg``, a snapshot or a delta of a scope) share one layout:
``MPVX`` + a 4-byte big-endian header length + a JSON header + a float32 matrix (rows x dim,
little-endian). The header names the embedder and, per row, the pointer id, the pointer
version the vector was made for and the text it was made from (the keyword score needs it).
"""

from __future__ import annotations

import json
import uuid
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


def encode(rows: Rows) -> bytes:
    header = json.dumps({
        "model": rows.model, "dim": int(rows.vectors.shape[1]) if rows.vectors.ndim == 2 else 0,
        "ids": [i.hex for i in rows.ids], "versions": rows.versions, "texts": rows.texts,
    }, ensure_ascii=False, separators=(",", ":")).encode()
    matrix = np.ascontiguousarray(rows.vectors, dtype="<f4")
    return _MAGIC + len(header).to_bytes(4, "big") + header + matrix.tobytes()


def decode(data: bytes) -> Rows:
    if data[:4] != _MAGIC or len(data) < 8:
        raise CorruptIndexObject("not a memplane search index object")
    size = int.from_bytes(data[4:8], "big")
    try:
        header = json.loads(data[8:8 + size])
        ids = [uuid.UUID(hex=h) for h in header["ids"]]
        dim = int(header["dim"])
        matrix = np.frombuffer(data[8 + size:], dtype="<f4").astype(np.float32)
        vectors = matrix.reshape(len(ids), dim) if ids else np.zeros((0, dim), np.float32)
        return Rows(str(header["model"]), ids, [int(v) for v in header["versions"]],
                    [str(t) for t in header["texts"]], vectors)
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptIndexObject(f"search index object does not parse: {exc}") from None
