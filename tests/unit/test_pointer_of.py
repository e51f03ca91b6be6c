"""A lookup's row as a MemoryPointer (``hotpath.pointer_of``), built without the ORM
constructor: the same values and the same answer as a pointer built the usual way."""

from __future__ import annotations

import uuid
from collections import namedtuple
from datetime import UTC, datetime

from sqlalchemy import inspect

from control_plane.db.models import MemoryPointer
from control_plane.memories.repository import pointer_of
from control_plane.memories.schemas import PointerOut

COLUMNS = [c.key for c in MemoryPointer.__table__.c]


def _values() -> dict[str, object]:
    values: dict[str, object] = dict.fromkeys(COLUMNS)
    values.update(
        id=uuid.uuid4(), tenant_id=uuid.uuid4(), scope_type="user", scope_ref="u-1", key="k",
        memory_type="fact", subject_user_id="u-1", tags=["a", "b"], importance=4,
        source="api", storage_config_id=uuid.uuid4(), storage_path="memories/x.json",
        content_sha256="ab" * 32, content_size=17, sync_status="synced", version=3,
        has_embeddings=True, embedding_model="hash-256",
        # PostgreSQL's driver answers aware datetimes in the session's zone, SQLite naive UTC.
        created_at=datetime(2026, 1, 2, 3, 4, 5),
        updated_at=datetime(2026, 1, 2, 4, 4, 5, tzinfo=UTC),
    )
    return values


def test_a_row_becomes_a_pointer_with_every_column_and_utc_times() -> None:
    values = _values()
    row = namedtuple("Row", [*COLUMNS, "logged"])(**values, logged=True)  # extra columns ignored
    pointer = pointer_of(row)
    assert isinstance(pointer, MemoryPointer)
    assert inspect(pointer).transient  # in no session
    expected = values | {"created_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)}
    assert {name: getattr(pointer, name) for name in COLUMNS} == expected
    built = MemoryPointer(**expected)
    assert PointerOut.of(pointer).model_dump(mode="json") == PointerOut.of(built).model_dump(
        mode="json")



def test_columns_are_found_by_name_whatever_their_order_in_the_row() -> None:
    values = _values()
    shuffled = ["logged", *reversed(COLUMNS)]
    first = namedtuple("Row", shuffled)(**values, logged=True)
    again = namedtuple("Row", shuffled)(**(values | {"key": "other", "version": 4}),
                                        logged=False)
    expected = values | {"created_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)}
    assert {name: getattr(pointer_of(first), name) for name in COLUMNS} == expected
    # A second row of the same shape is read through the same positions, its own values.
    assert {name: getattr(pointer_of(again), name) for name in COLUMNS} == expected | {
        "key": "other", "version": 4}
