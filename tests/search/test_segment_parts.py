"""A segment keeps each data subject's rows in a part sealed under that subject's key: the
scope's key alone opens none of them, a destroyed subject key drops exactly that subject's
rows, and a damaged or extended part makes the segment unreadable (never rows of another)."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest

from control_plane.db.base import new_id, utcnow
from control_plane.db.models import MemoryPointer
from control_plane.keys import subject_keys as keys
from control_plane.search import codec, store
from control_plane.search.index import SearchCache
from storage_adapters import envelope
from tests.support.crypto import open_stored, tampered
from tests.support.service import ServiceWorld

SUBJECTS = [None, "bob", "dan", "bob", None]


def _segment(world: ServiceWorld, subjects: list[str | None] | None) -> tuple[Any, codec.Rows]:
    """A team segment of five rows (two of bob, one of dan), its pointers in the database."""
    ids = [new_id() for _ in SUBJECTS]
    runtime = world.runtime
    with runtime.sessions() as session:
        target = runtime.plane.active(session, world.tenant_id)
        for i, (pointer_id, subject) in enumerate(zip(ids, SUBJECTS, strict=True)):
            session.add(MemoryPointer(
                id=pointer_id, tenant_id=world.tenant_id, scope_type="team", scope_ref="T1",
                key=f"k{i}", version=1, created_at=utcnow(), updated_at=utcnow(),
                memory_type="fact", tags=[], importance=3, source="api",
                has_embeddings=False, storage_config_id=target.config_id,
                storage_path=f"x/{i}", content_sha256="0" * 64, content_size=1,
                sync_status="synced", subject_user_id=subject))
        session.commit()
        rows = codec.Rows("m", ids, [1] * 5, [f"text {s} {i}" for i, s in enumerate(SUBJECTS)],
                          np.arange(15, dtype=np.float32).reshape(5, 3), subjects)
        segment_id = new_id()
        path = store.put_segment(session, runtime.plane, target, world.tenant_id, "team", "T1",
                                 segment_id, rows)

    class Row:
        id, tenant_id, storage_path = segment_id, world.tenant_id, path
        storage_config_id = target.config_id

    return Row, rows


def _load(world: ServiceWorld, row: Any) -> codec.Rows:
    with world.runtime.sessions() as session:
        segment = store.load_segment(session, world.runtime.plane,
                                     SearchCache(max_rows=0, max_value_bytes=0), row)
    return codec.Rows("m", list(segment.ids), [int(v) for v in segment.versions],
                      list(segment.texts), np.asarray(segment.vectors))


@pytest.mark.parametrize("told", [True, False], ids=["subjects-given", "subjects-looked-up"])
def test_each_subjects_rows_open_only_with_their_key(world: ServiceWorld, told: bool) -> None:
    row, rows = _segment(world, SUBJECTS if told else None)
    with world.runtime.sessions() as session:
        blob = world.runtime.plane.by_id(session, row.storage_config_id).adapter.get(
            row.storage_path)
    # What the scope's key opens (the first envelope) holds the rows of no subject.
    header = envelope.read_header(blob)
    end = (envelope.HEADER_BYTES + header.plaintext_size
           + header.chunks * (envelope.NONCE_BYTES + envelope.TAG_BYTES))
    own = codec.decode(open_stored(world.runtime, world.tenant_id, row.storage_path, row.id,
                                   blob[:end]))
    assert own.texts == ["text None 0", "text None 4"]
    assert b"text bob" not in blob and end < len(blob)
    loaded = _load(world, row)
    assert sorted(loaded.texts) == sorted(rows.texts)
    by_id = dict(zip(loaded.ids, loaded.vectors.tolist(), strict=True))
    assert by_id == dict(zip(rows.ids, rows.vectors.tolist(), strict=True))

    with world.runtime.sessions() as session:
        assert keys.shred_subject(session, world.tenant_id, "bob") == 1
    after = _load(world, row)
    assert sorted(after.texts) == sorted(t for t, s in zip(rows.texts, SUBJECTS, strict=True)
                                         if s != "bob")


@pytest.mark.parametrize("damage", ["part byte", "trailing byte", "cut"])
def test_a_damaged_part_makes_the_segment_unreadable(world: ServiceWorld, damage: str) -> None:
    row, _ = _segment(world, SUBJECTS)
    with world.runtime.sessions() as session:
        adapter = world.runtime.plane.by_id(session, row.storage_config_id).adapter
    blob = adapter.get(row.storage_path)
    changed = {"part byte": tampered(blob), "trailing byte": blob + b"\0",
               "cut": blob[:-1]}[damage]
    adapter.delete_many([row.storage_path])
    adapter.put(row.storage_path, changed)
    with pytest.raises(store.IndexObjectUnreadable):
        _load(world, row)


def test_a_segment_written_before_parts_still_reads(world: ServiceWorld) -> None:
    runtime = world.runtime
    rows = codec.Rows("m", [uuid.uuid4()], [1], ["old text"], np.ones((1, 3), np.float32))
    segment_id = new_id()
    with runtime.sessions() as session:
        target = runtime.plane.active(session, world.tenant_id)
        path = store.segment_path(target, "team", "T1", segment_id)
        handle = keys.key_for_write(session, runtime.plane.keys, world.tenant_id, ("team", "T1"))
        target.adapter.put(path, keys.seal_object(runtime.plane.keys, world.tenant_id, handle,
                                                  path, segment_id, codec.encode(rows)))

    class Row:
        id, tenant_id, storage_path = segment_id, world.tenant_id, path
        storage_config_id = target.config_id

    assert _load(world, Row).texts == ["old text"]
