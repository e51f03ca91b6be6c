"""A segment's rows of each data subject, sealed under that subject's key (DESIGN §12).

A scope's segment is sealed under the scope's key, which no erasure destroys. The rows of
memories about a data subject (``subject_user_id``) — their texts and vectors, derived from
the subject's content — go instead into a part sealed under the subject's own key, stored
after the segment's own sealed bytes in the same object (one read; each byte decrypted
once). Destroying that key at the subject's erasure makes those rows unreadable in every
copy of every segment that ever held them: old versions, soft-deleted copies and backups
included, as for the content itself. The erasure rewrites the live segments without them as
well (``segment_writing.forget_pointers``).

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
from ..keys import subject_keys as keys
from ..memories.shared import keyring_of
from ..plane.data_plane import DataPlane
from ..plane.keyring import Keyring
from . import codec


def seal(session: Session, plane: DataPlane, tenant_id: uuid.UUID, scope: str,
         scope_ref: str, path: str, segment_id: uuid.UUID, rows: codec.Rows
         ) -> tuple[bytes, list[bytes]]:
    """The segment's own plaintext (the rows of no other subject, to be sealed under the
    scope's key) and its parts: each other subject's rows sealed under that subject's key
    (created if need be). ``rows.subjects`` if the writer knows them, else looked up."""
    ring = keyring_of(plane)
    if not ring.enabled or not rows.ids:
        return codec.encode(rows), []
    subjects = rows.subjects
    if subjects is None:
        found = {r.id: r.subject_user_id for r in session.execute(
            select(MemoryPointer.id, MemoryPointer.subject_user_id)
            .where(MemoryPointer.tenant_id == tenant_id, MemoryPointer.id.in_(rows.ids),
                   MemoryPointer.subject_user_id.is_not(None)))}
        session.commit()
        subjects = [found.get(pointer_id) for pointer_id in rows.ids]
    own = keys.subject_of(scope, scope_ref, None)
    kept: list[int] = []
    by_subject: dict[str, list[int]] = defaultdict(list)
    for i, subject in enumerate(subjects):
        if subject is None or (keys.USER, subject) == own:
            kept.append(i)
        else:
            by_subject[subject].append(i)
    handles = _subject_keys(session, ring, tenant_id, sorted(by_subject))
    sealed = [keys.seal_object(ring, tenant_id, handles[subject], path, segment_id,
                               codec.encode(codec.take(rows, index)))
              for subject, index in sorted(by_subject.items())]
    return codec.encode(codec.take(rows, kept), [len(p) for p in sealed]), sealed


def _subject_keys(session: Session, ring: Keyring, tenant_id: uuid.UUID,
                  subjects: list[str]) -> dict[str, keys.SubjectKeyHandle]:
    """Each subject's live key: one query for those that have one (unwrapped from the cache
    once seen), created for the others."""
    found = session.execute(
        select(SubjectKey.id, SubjectKey.scope_ref, SubjectKey.wrapped_key,
               SubjectKey.kek_version_id)
        .where(SubjectKey.tenant_id == tenant_id, SubjectKey.scope_type == keys.USER,
               SubjectKey.scope_ref.in_(subjects), SubjectKey.destroyed_at.is_(None))).all()
    handles = {r.scope_ref: keys.handle_of(session, ring, tenant_id, r.id,
                                           (keys.USER, r.scope_ref), bytes(r.wrapped_key),
                                           r.kek_version_id)
               for r in found if r.wrapped_key is not None}
    session.commit()
    for subject in subjects:
        if subject not in handles:
            handles[subject] = keys.key_for_write(session, ring, tenant_id, (keys.USER, subject))
            session.commit()
    return handles


def open_rows(session: Session, plane: DataPlane, tenant_id: uuid.UUID, path: str,
              segment_id: uuid.UUID, blob: bytes) -> codec.Rows:
    """Every row of a stored segment that can still be read: its own (under the scope's
    key), and those of each part whose subject key exists. ``DecryptionError`` or
    ``codec.CorruptIndexObject`` if any of it is damaged."""
    if not envelope.is_envelope(blob):  # encryption off (open_object refuses it if on)
        return codec.decode(keys.open_object(session, keyring_of(plane), tenant_id, path,
                                             segment_id, blob))
    header = envelope.read_header(blob)
    end = (envelope.HEADER_BYTES + header.plaintext_size
           + header.chunks * (envelope.NONCE_BYTES + envelope.TAG_BYTES))
    rows, sizes = codec.split(keys.open_object(session, keyring_of(plane), tenant_id, path,
                                               segment_id, blob[:end]))
    if end + sum(sizes) != len(blob):
        raise DecryptionError("the segment's parts do not add up to its size")
    if not sizes:
        return rows
    sealed = []
    for size in sizes:
        sealed.append(blob[end:end + size])
        end += size
    headers = [envelope.read_header(part) for part in sealed]
    found = session.execute(
        select(SubjectKey.id, SubjectKey.scope_type, SubjectKey.scope_ref,
               SubjectKey.wrapped_key, SubjectKey.kek_version_id)
        .where(SubjectKey.tenant_id == tenant_id,
               SubjectKey.id.in_({h.key_id for h in headers}))).all()
    live = {r.id: r for r in found if r.wrapped_key is not None}
    ring = keyring_of(plane)
    joined = [rows] if rows.ids else []
    for part, part_header in zip(sealed, headers, strict=True):
        row = live.get(part_header.key_id)
        if row is None:
            continue  # destroyed with its subject: those memories are erased
        handle = keys.handle_of(session, ring, tenant_id, row.id,
                                (row.scope_type, row.scope_ref), bytes(row.wrapped_key),
                                row.kek_version_id)
        opened = codec.decode(keys.open_with(tenant_id, path, segment_id, part, handle.key,
                                             part_header))
        if opened.model != rows.model:
            raise DecryptionError("a part of the segment was made by another embedder")
        joined.append(opened)
    session.commit()
    return codec.join(joined) if joined else rows
