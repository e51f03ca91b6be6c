"""Reading back the content a vector is made from (the indexer's step 1): each pointer's
object fetched as stored, opened with its subject key and verified against the pointer (I3);
a mismatch marks the pointer corrupt and audits the failure, as a read would."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters import envelope
from storage_adapters.envelope import DecryptionError

from ..audit import service as audit
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import MemoryPointer, SubjectKey
from ..identity import Actor
from ..keys import subject_keys as keys
from ..kit import sha256_hex
from ..memories import repository as memories_repo
from ..memories.shared import keyring_of
from ..plane.data_plane import DataPlane, Target
from . import store
from .text import searchable_text


def _system(tenant_id: uuid.UUID) -> Actor:
    return Actor(tenant_id=tenant_id, accessor_type="system", accessor_id="search-indexer")


_MISSING = object()  # a content object the bucket does not have


def fetch_content(target: Target, pointer: MemoryPointer) -> bytes | object:
    """The stored bytes of the pointer's content, as they are (no session: runs on the I/O
    pool); ``_MISSING`` if the bucket has no such object."""
    try:
        with store.storage_errors(pointer.id):
            return target.adapter.get(pointer.storage_path,
                                      envelope.sealed_size(pointer.content_size))
    except storage.ObjectNotFound:
        return _MISSING


def live_keys(session: Session, tenant_id: uuid.UUID, blobs: Iterable[bytes | object]
              ) -> dict[uuid.UUID, tuple[uuid.UUID, bytes, uuid.UUID]]:
    """The subject keys the blobs' envelopes name, read in one query (id -> (id, wrapped
    key, KEK version), as ``keys.open_object`` takes them): no lookup per object."""
    wanted = set()
    for blob in blobs:
        if isinstance(blob, bytes) and envelope.is_envelope(blob):
            try:
                wanted.add(envelope.read_header(blob).key_id)
            except DecryptionError:
                continue  # opening it reports the damage
    if not wanted:
        return {}
    rows = session.execute(select(SubjectKey.id, SubjectKey.wrapped_key,
                                  SubjectKey.kek_version_id)
                           .where(SubjectKey.tenant_id == tenant_id,
                                  SubjectKey.id.in_(sorted(wanted)))).all()
    session.commit()
    return {r.id: (r.id, bytes(r.wrapped_key), r.kek_version_id) for r in rows
            if r.wrapped_key is not None}  # a destroyed key: open_object says so


def verified_text(session: Session, plane: DataPlane, pointer: MemoryPointer,
                  blob: bytes | object,
                  live: dict[uuid.UUID, tuple[uuid.UUID, bytes, uuid.UUID]]) -> str | None:
    """The pointer's searchable text from its content, opened and checked against the
    pointer's hash (I3); None if it does not verify (the pointer is then marked corrupt and
    the failure audited, as a read does)."""
    problem = None
    actual = None
    data = b""
    if isinstance(blob, bytes):
        key_id = None
        if envelope.is_envelope(blob):
            try:
                key_id = envelope.read_header(blob).key_id
            except DecryptionError:
                key_id = None
        try:
            data = keys.open_object(session, keyring_of(plane), pointer.tenant_id,
                                    pointer.storage_path, pointer.id, blob,
                                    live.get(key_id) if key_id is not None else None)
            actual = sha256_hex(data)
        except DecryptionError as exc:
            data, problem = b"", str(exc)
        if session.in_transaction():  # a key looked up, or unwrapped with its KEK row
            session.commit()
    if actual == pointer.content_sha256:
        return searchable_text(json.loads(data), pointer.title)
    begin_write(session)
    if not memories_repo.mark_corrupt(session, pointer.id, pointer.storage_path, utcnow()):
        session.rollback()  # rewritten meanwhile: the next round takes the new content
        return None
    what = ("could not be decrypted" if problem is not None
            else "is missing from the bucket" if actual is None else "does not match its hash")
    audit.record(session, _system(pointer.tenant_id), "read", success=False,
                 pointer_id=pointer.id,
                 detail=f"hash_mismatch (search indexer): object {what}; expected "
                        f"{pointer.content_sha256} actual {actual}")
    session.commit()
    return None
