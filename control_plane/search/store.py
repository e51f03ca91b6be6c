"""The index's objects in the tenant's bucket, sealed like content (DESIGN §6, §11).

A pointer's vector object is sealed under the pointer's own subject key (with its pointer id
in the associated data), exactly as its content; a scope's segments under the scope's key
(the user's key for a ``user`` scope), with the segment id in the associated data — and the
rows of another data subject's memories in parts under that subject's key (``parts.py``).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters.bounded import ObjectTooLarge
from storage_adapters.envelope import DecryptionError

from ..addresses import MemoryAddress
from ..db.models import MemoryPointer, SearchSegment
from ..errors import HashMismatch
from ..keys import subject_keys as keys
from ..memories.search_objects import SEGMENT_SUFFIX, vector_path
from ..memories.shared import keyring_of
from ..plane.data_plane import DataPlane, Target, storage_errors
from . import codec, parts
from .index import SearchCache, Segment


class IndexObjectUnreadable(Exception):
    """A segment or vector object is missing, does not decrypt or does not parse."""


INDEX_OBJECT_CEILING = 256 << 20
"""The most a segment or vector object may take from the bucket: no pointer records their
stored size, so a fixed ceiling bounds the read (a larger one is unreadable, and rebuilt)."""

def _key(session: Session, plane: DataPlane, tenant_id: uuid.UUID,
         subject: tuple[str, str]) -> keys.SubjectKeyHandle | None:
    ring = keyring_of(plane)
    if not ring.enabled:
        return None
    return keys.key_for_write(session, ring, tenant_id, subject)


def _put(target: Target, path: str, blob: bytes) -> None:
    with storage_errors():
        try:
            target.adapter.put(path, blob)
        except storage.ObjectExists:  # left by an indexer stopped before it recorded it
            target.adapter.delete_many([path])
            target.adapter.put(path, blob)


def vector_key(session: Session, plane: DataPlane,
               pointer: MemoryPointer) -> keys.SubjectKeyHandle | None:
    """The key a pointer's vector is sealed under: its content's subject key."""
    key = _key(session, plane, pointer.tenant_id,
               keys.subject_of(pointer.scope_type, pointer.scope_ref, pointer.subject_user_id))
    session.commit()
    return key


def put_vector(session: Session, plane: DataPlane, target: Target, pointer: MemoryPointer,
               rows: codec.Rows, key: keys.SubjectKeyHandle | None) -> str:
    """Seal one pointer's vector (a one-row ``Rows``) under ``key`` (``vector_key``) and put
    it beside its content."""
    path, blob = seal_vector(plane, pointer, rows, key)
    _put(target, path, blob)
    return path


def seal_vector(plane: DataPlane, pointer: MemoryPointer, rows: codec.Rows,
                key: keys.SubjectKeyHandle | None) -> tuple[str, bytes]:
    """The path beside the pointer's content and the sealed bytes of its vector."""
    path = vector_path(pointer.storage_path)
    return path, keys.seal_object(keyring_of(plane), pointer.tenant_id, key, path, pointer.id,
                                  codec.encode(rows))


def put_vectors(target: Target, items: list[tuple[str, bytes]]) -> None:
    """``seal_vector``'s objects into a bucket that stores many together (``put_many``: on a
    local bucket, one flush for all); a vector left at its path by an indexer stopped before
    it recorded it is replaced, as ``put_vector`` does."""
    adapter = target.adapter
    assert isinstance(adapter, storage.BatchAdapter)
    with storage_errors():
        answers = adapter.put_many(items)
    for (path, blob), answer in zip(items, answers, strict=True):
        if isinstance(answer, storage.ObjectExists):
            _put(target, path, blob)
        elif answer is not None:
            with storage_errors():
                raise answer


def read_vector(session: Session, plane: DataPlane, target: Target, tenant_id: uuid.UUID,
                pointer_id: uuid.UUID, path: str) -> codec.Rows:
    return _open(session, plane, target, tenant_id, pointer_id, path)


def segment_path(target: Target, scope: str, scope_ref: str, segment_id: uuid.UUID) -> str:
    # "@" never starts a key's segment (keys are percent-encoded): no memory's directory
    # meets it; it stays under the scope's directory, so a user's erasure sweeps it.
    return target.path(f"{MemoryAddress(scope, scope_ref).scope_dir()}/@search/"
                       f"{segment_id.hex}{SEGMENT_SUFFIX}")


def put_segment(session: Session, plane: DataPlane, target: Target, tenant_id: uuid.UUID,
                scope: str, scope_ref: str, segment_id: uuid.UUID, rows: codec.Rows) -> str:
    path = segment_path(target, scope, scope_ref, segment_id)
    own, sealed = parts.seal(session, plane, tenant_id, scope, scope_ref, path, segment_id,
                             rows)
    key = _key(session, plane, tenant_id, keys.subject_of(scope, scope_ref, None))
    session.commit()
    blob = b"".join((keys.seal_object(keyring_of(plane), tenant_id, key, path, segment_id,
                                      own), *sealed))
    _put(target, path, blob)
    return path


def load_segment(session: Session, plane: DataPlane, cache: SearchCache,
                 row: SearchSegment | Any) -> Segment:
    """The segment from the cache, else read (one object read), opened and indexed; ``row``
    a SearchSegment or a row with its columns (``repository.SEGMENT_COLUMNS``)."""
    found = cache.segment(row.id)
    if found is not None:
        return found
    target = plane.by_id(session, row.storage_config_id)
    rows = _open(session, plane, target, row.tenant_id, row.id, row.storage_path,
                 segment=True)
    segment = Segment.of(row.id, rows)
    cache.keep_segment(segment)
    return segment


def _open(session: Session, plane: DataPlane, target: Target, tenant_id: uuid.UUID,
          object_id: uuid.UUID, path: str, *, segment: bool = False) -> codec.Rows:
    try:
        with storage_errors():
            blob = target.adapter.get(path, INDEX_OBJECT_CEILING)
        if segment:
            return parts.open_rows(session, plane, tenant_id, path, object_id, blob)
        data = keys.open_object(session, keyring_of(plane), tenant_id, path, object_id, blob)
        return codec.decode(data)
    except (storage.ObjectNotFound, DecryptionError, codec.CorruptIndexObject) as exc:
        raise IndexObjectUnreadable(type(exc).__name__) from None
    except HashMismatch as exc:
        if isinstance(exc.__cause__, ObjectTooLarge):  # over the ceiling: never kept
            raise IndexObjectUnreadable("ObjectTooLarge") from None
        raise
