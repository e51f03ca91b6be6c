"""A pointer's JSON answer built directly (``schemas.pointer_json``) is the model's
(``PointerOut.of(p).model_dump(mode="json")``), value for value and byte for byte, for
every shape a saved pointer takes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import to_json

from control_plane.db.models import MemoryPointer
from control_plane.memories.schemas import PointerOut, pointer_json

COLUMNS = [c.key for c in MemoryPointer.__table__.c]
TEXT = st.text(max_size=12)
OPTIONAL_TEXT = st.none() | TEXT
TIMES = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 31),
                     timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]))


@st.composite
def pointers(draw: st.DrawFn) -> MemoryPointer:
    path = draw(st.sampled_from(["memories/user/u/k/v1.json", "memories/agent/a/k/v2.json"]))
    vector = draw(st.sampled_from([None, f"{path}.vec", "memories/user/u/k/old.json.vec"]))
    values: dict[str, object] = dict.fromkeys(COLUMNS)
    values.update(
        id=uuid.UUID(int=draw(st.integers(0, 2**128 - 1))), tenant_id=uuid.uuid4(),
        scope_type=draw(st.sampled_from(["user", "agent", "tenant", "conversation", "team"])),
        scope_ref=draw(TEXT), key=draw(OPTIONAL_TEXT), memory_type=draw(TEXT),
        title=draw(OPTIONAL_TEXT), tags=draw(st.none() | st.lists(TEXT, max_size=3)),
        importance=draw(st.integers(1, 5)), source=draw(TEXT),
        subject_user_id=draw(OPTIONAL_TEXT), agent_id=draw(OPTIONAL_TEXT),
        storage_config_id=uuid.uuid4(), storage_path=path,
        content_sha256=draw(st.text("0123456789abcdef", min_size=64, max_size=64)),
        content_size=draw(st.integers(0, 2**40)),
        sync_status=draw(st.sampled_from(["synced", "pending_write", "corrupt"])),
        version=draw(st.integers(1, 2**31 - 1)), has_embeddings=draw(st.booleans()),
        embedding_model=draw(st.none() | st.just("hash-256")),
        embedding_storage_path=vector, created_at=draw(TIMES), updated_at=draw(TIMES),
        expires_at=draw(st.none() | TIMES),
        storage_class=draw(st.none() | st.just("STANDARD_IA")),
        searchable=draw(st.none() | st.booleans()))
    return MemoryPointer(**values)


@settings(max_examples=300)
@given(pointers())
def test_the_direct_answer_is_the_models_to_the_byte(pointer: MemoryPointer) -> None:
    model = PointerOut.of(pointer)
    assert pointer_json(pointer) == model.model_dump(mode="json")
    assert to_json(pointer_json(pointer)) == to_json(model)


def test_a_stale_vector_is_not_reported_and_times_are_written_as_pydantic_writes_them() -> None:
    pointer = MemoryPointer(
        id=uuid.UUID(int=7), scope_type="user", scope_ref="u-1", key="lang",
        memory_type="preference", title=None, tags=None, importance=3, source="api",
        subject_user_id="u-1", agent_id=None, storage_path="memories/user/u-1/lang/v2.json",
        content_sha256="ab" * 32, content_size=4, sync_status="synced", version=2,
        has_embeddings=True, embedding_model="hash-256",
        embedding_storage_path="memories/user/u-1/lang/v1.json.vec",  # the old value's
        created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        updated_at=datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC), expires_at=None,
        storage_class=None, searchable=False)
    answer = pointer_json(pointer)
    assert answer["id"] == "00000000-0000-0000-0000-000000000007"
    assert (answer["has_embeddings"], answer["embedding_model"],
            answer["embedding_storage_path"]) == (False, None, None)
    assert (answer["tags"], answer["searchable"]) == ([], False)
    assert (answer["created_at"], answer["updated_at"]) == ("2026-01-02T03:04:05Z",
                                                            "2026-01-02T03:04:05.120000Z")
