"""Success answers are parsed into the typed models."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

import memplane

from .helpers import (
    API_KEY,
    BASE_URL,
    KEY_ID,
    TENANT_ID,
    VERSION_ID,
    Recorder,
    audit_json,
    page_json,
    pointer_json,
)


def _client(*replies: httpx.Response) -> memplane.Client:
    return memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(Recorder(*replies)))


def test_set_returns_a_pointer_with_parsed_datetimes() -> None:
    with _client(httpx.Response(200, json=pointer_json(expires_at="2026-01-01T00:00:00Z"))) as c:
        pointer = c.memory.set(scope="user", scope_ref="u1", key="prefs", value=1)

    assert pointer == memplane.Pointer(
        id="0b5e3c1e-8d3f-4f7e-9a51-0d6c1f2e3a4b",
        tenant_id=TENANT_ID,
        scope="user",
        scope_ref="u1",
        key="prefs",
        memory_type="preference",
        title="Preferences",
        tags=["ui"],
        importance=3,
        source="api",
        user_id="u1",
        agent_id=None,
        storage_path=f"tenants/{TENANT_ID}/memories/user/u1/prefs/{VERSION_ID}.json",
        content_sha256="ab" * 32,
        content_size=17,
        sync_status="synced",
        version=3,
        has_embeddings=False,
        embedding_model=None,
        created_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
        updated_at=datetime(2025, 1, 3, 3, 4, 5, tzinfo=UTC),
        expires_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_unknown_server_fields_are_kept_not_rejected() -> None:
    with _client(httpx.Response(200, json={**pointer_json(), "shard": "eu-1"})) as c:
        pointer = c.memory.set(scope="user", scope_ref="u1", key="prefs", value=1)

    assert pointer.model_extra == {"shard": "eu-1"}


def test_get_returns_value_and_pointer() -> None:
    answer = {"value": {"tone": "brief", "n": [1, 2]}, "pointer": pointer_json(version=9)}
    with _client(httpx.Response(200, json=answer)) as c:
        memory = c.memory.get(scope="user", scope_ref="u1", key="prefs")

    assert memory.value == {"tone": "brief", "n": [1, 2]}
    assert memory.pointer.version == 9
    assert memory.pointer.key == "prefs"


def test_delete_accepts_an_empty_204() -> None:
    recorder = Recorder(httpx.Response(204))
    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(recorder)) as c:
        c.memory.delete(scope="user", scope_ref="u1", key="prefs")

    assert (recorder.only.method, recorder.only.url.path) == (
        "DELETE",
        "/v1/memories/user/u1/prefs",
    )


def test_clear_returns_the_deleted_count() -> None:
    with _client(httpx.Response(200, json={"deleted": 12})) as c:
        assert c.memory.clear(scope="user", scope_ref="u1") == 12


def test_list_pointers_returns_a_page() -> None:
    answer = page_json([pointer_json(key="a"), pointer_json(key="b")], next_cursor="n1")
    with _client(httpx.Response(200, json=answer)) as c:
        page = c.memory.list_pointers(scope="user")

    assert [p.key for p in page.items] == ["a", "b"]
    assert page.next_cursor == "n1"
    assert isinstance(page.items[0], memplane.Pointer)


def test_audit_entries_allow_an_unsealed_seq() -> None:
    failed = "hash_mismatch: object is missing from the bucket; expected " + "ab" * 32
    answer = page_json([audit_json(), audit_json(seq=None, success=False, detail=failed)])
    with _client(httpx.Response(200, json=answer)) as c:
        page = c.audit.list()

    assert [(e.seq, e.success, e.detail) for e in page.items] == [
        (7, True, "user user/u1 key=prefs"),
        (None, False, failed),
    ]
    assert [(e.accessor_type, e.accessor_id) for e in page.items] == [
        ("agent", f"key:{KEY_ID}")] * 2
    assert page.items[0].accessed_at == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert page.next_cursor is None


def test_audit_verify() -> None:
    answer = {"ok": False, "checked": 10, "unsealed": 2, "first_bad_seq": 4}
    with _client(httpx.Response(200, json=answer)) as c:
        result = c.audit.verify()

    assert result == memplane.AuditVerification(ok=False, checked=10, unsealed=2, first_bad_seq=4)


def test_created_key_hides_its_secret_from_repr() -> None:
    answer = {"id": "key-2", "role": "agent", "name": "bot", "api_key": "mp_secret"}
    with _client(httpx.Response(201, json=answer)) as c:
        key = c.keys.create(role="agent", name="bot")

    assert (key.id, key.role, key.name, key.api_key) == ("key-2", "agent", "bot", "mp_secret")
    assert "mp_secret" not in repr(key)


def test_created_tenant() -> None:
    answer = {"tenant": {"id": "t2", "name": "acme"}, "api_key": "mp_admin"}
    with _client(httpx.Response(201, json=answer)) as c:
        created = c.tenants.create(name="acme")

    assert created.tenant == memplane.Tenant(id="t2", name="acme")
    assert created.api_key == "mp_admin"
    assert "mp_admin" not in repr(created)


@pytest.mark.parametrize(
    ("status", "expected"), [(200, True), (204, True), (500, False), (503, False)]
)
def test_health_and_ready_read_the_status(status: int, expected: bool) -> None:
    with _client(httpx.Response(status), httpx.Response(status)) as c:
        assert c.health() is expected
        assert c.ready() is expected


def test_health_is_false_when_the_server_is_unreachable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(refuse)) as c:
        assert c.health() is False


def test_a_success_answer_that_is_not_json_raises_invalid_response() -> None:
    reply = httpx.Response(200, text="<html>proxy</html>", headers={"content-type": "text/html"})
    with _client(reply) as c:
        with pytest.raises(
            memplane.InvalidResponse,
            match="GET /v1/memories/user/u1/k: expected JSON, got text/html",
        ):
            c.memory.get(scope="user", scope_ref="u1", key="k")


def test_a_success_answer_of_the_wrong_shape_raises_invalid_response() -> None:
    with _client(httpx.Response(200, json={"value": 1})) as c:
        with pytest.raises(memplane.InvalidResponse, match="answer does not match Memory"):
            c.memory.get(scope="user", scope_ref="u1", key="k")


def test_clear_without_a_count_raises_invalid_response() -> None:
    with _client(httpx.Response(200, json={"deleted": "many"})) as c:
        with pytest.raises(memplane.InvalidResponse, match="expected {'deleted': <int>}"):
            c.memory.clear(scope="user", scope_ref="u1")
