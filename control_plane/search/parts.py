"""A segment's rows of each data subject, sealed under that subject's key (DESIGN §12).

A scope's segment is sealed under the scope's key, which no erasure destroys. The rows of
memories about a data subject (``subject_user_id``) — their texts and vectors, derived from
the subject's content — go instead into a part of the segment sealed under the subject's own
key (``codec``: parts follow the matrix). Destroying that key at the subject's erasure makes
those rows unreadable in every copy of every segment that ever held them: old versions,
soft-deleted copies and backups included, as for the content itself. The erasure rewrites
the live segments without them as well (``indexer.forget_pointers``).

Reading a segment costs one query for the keys of all its parts (cached once unwrapped);
a part whose key was destroyed is left out: its memories are gone.
"""

from __future__ import annotations

import uuid
from collections import defaultdict

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage_adapters import envelope
from storage_adapters.envelope import DecryptionError

from ..db.models import MemoryPointer, SubjectKey
from ..keys import service as keys
from ..memories.shared import keyring_of
from ..storage_config.plane import DataPlane
from . import codec


def seal(session: Session, plane: DataPlane, tenant_id: uuid.UUID, scope: str,
         scope_ref: str, path: str, segment_id: uuid.UUID, rows: codec.Rows) -> bytes:
    """The segment's plaintext: the scope's own rows in clear, each other subject's rows in
    a part sealed under that subject's key (created if need be)."""
    ring = keyring_of(plane)
    if not ring.enabled or not rows.ids:
        return codec.encode(rows)
    subjects: dict[uuid.UUID, str | None] = {r.id: r.subject_user_id for r in session.execute(
        select(MemoryPointer.id, MemoryPointer.subject_user_id)
        .where(MemoryPointer.tenant_id == tenant_id, MemoryPointer.id.in_(rows.ids)))}
    session.commit()
    own = keys.subject_of(scope, scope_ref, None)
    kept: list[int] = []
    by_subject: dict[str, list[int]] = defaultdict(list)
    for i, pointer_id in enumerate(rows.ids):
        subject = subjects.get(pointer_id)
        if subject is None or (keys.USER, subject) == own:
            kept.append(i)
        else:
            by_subject[subject].append(i)
    sealed = []
    for subject, index in sorted(by_subject.items()):
        handle = keys.key_for_write(session, ring, tenant_id, (keys.USER, subject))
        session.commit()
        sealed.append(keys.seal_object(ring, tenant_id, handle, path, segment_id,
                                       codec.encode(codec.take(rows, index))))
    return codec.encode(codec.take(rows, kept), sealed)


def open_rows(session: Session, plane: DataPlane, tenant_id: uuid.UUID, path: str,
              segment_id: uuid.UUID, data: bytes) -> codec.Rows:
    """All rows of a segment's plaintext that can still be read: its own, and those of each
    part whose subject key exists. ``DecryptionError`` or ``codec.CorruptIndexObject`` if a
    part is damaged."""
    rows, sealed = codec.split(data)
    if not sealed:
        return rows
    headers = [envelope.read_header(blob) for blob in sealed]
    found = session.execute(
        select(SubjectKey.id, SubjectKey.scope_type, SubjectKey.scope_ref,
               SubjectKey.wrapped_key, SubjectKey.kek_version_id)
        .where(SubjectKey.tenant_id == tenant_id,
               SubjectKey.id.in_({h.key_id for h in headers}))).all()
    live = {r.id: r for r in found if r.wrapped_key is not None}
    ring = keyring_of(plane)
    joined = [rows]
    for blob, header in zip(sealed, headers, strict=True):
        row = live.get(header.key_id)
        if row is None:
            continue  # destroyed with its subject: those memories are erased
        handle = keys.handle_of(session, ring, tenant_id, row.id,
                                (row.scope_type, row.scope_ref), bytes(row.wrapped_key),
                                row.kek_version_id)
        part = codec.decode(keys.open_with(tenant_id, path, segment_id, blob, handle.key,
                                           header))
        if part.model != rows.model:
            raise DecryptionError("a part of the segment was made by another embedder")
        joined.append(part)
    session.commit()
    return codec.join([r for r in joined if r.ids] or [rows])
