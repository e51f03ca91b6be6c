"""The async client sends the same requests and raises the same errors as the sync one."""

from __future__ import annotations

import httpx
import pytest

import memplane

from .helpers import (
    API_KEY,
    BASE_URL,
    KEY_ID,
    TENANT_ID,
    Recorder,
    body_of,
    key_json,
    page_json,
    pointer_json,
    tenant_json,
    verification_json,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _client(recorder: Recorder) -> memplane.AsyncClient:
    return memplane.AsyncClient(BASE_URL, API_KEY, transport=httpx.MockTransport(recorder))


async def test_set_sends_the_same_request_as_the_sync_client() -> None:
    recorder = Recorder(httpx.Response(200, json=pointer_json()))
    async with _client(recorder) as client:
        pointer = await client.memory.set(
            scope="user", scope_ref="u1", key="../x", value=[1], tags=["t"], idempotency_key="i"
        )

    request = recorder.only
    assert (request.method, str(request.url)) == ("PUT", f"{BASE_URL}/v1/memories/user/u1/..%2Fx")
    assert body_of(request) == {"value": [1], "tags": ["t"]}
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.headers["user-agent"] == "memplane-python/0.1.0"
    assert request.headers["idempotency-key"] == "i"
    assert pointer.version == 3


async def test_get_and_append_and_delete() -> None:
    recorder = Recorder(
        httpx.Response(200, json={"value": ["a"], "pointer": pointer_json()}),
        httpx.Response(200, json=pointer_json(version=4)),
        httpx.Response(204),
    )
    async with _client(recorder) as client:
        memory = await client.memory.get(scope="tenant", key="log")
        appended = await client.memory.append(scope="tenant", key="log", value="b")
        await client.memory.delete(scope="tenant", key="log")

    assert (memory.value, appended.version) == (["a"], 4)
    assert [(r.method, r.url.raw_path) for r in recorder.requests] == [
        ("GET", b"/v1/memories/tenant/-/log"),
        ("POST", b"/v1/memories/tenant/-/log/append"),
        ("DELETE", b"/v1/memories/tenant/-/log"),
    ]
    assert body_of(recorder.requests[1]) == {"value": "b"}


async def test_errors_map_the_same_way() -> None:
    recorder = Recorder(
        httpx.Response(
            409,
            json={"error": "hash_mismatch", "detail": "x", "pointer_id": "p-9"},
            headers={"X-Request-ID": "r-9"},
        )
    )
    async with _client(recorder) as client:
        with pytest.raises(memplane.HashMismatch) as caught:
            await client.memory.get(scope="user", scope_ref="u1", key="k")

    assert (caught.value.pointer_id, caught.value.request_id) == ("p-9", "r-9")


async def test_transport_failure_raises_transport_error_and_health_reads_false() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with memplane.AsyncClient(
        BASE_URL, API_KEY, transport=httpx.MockTransport(refuse)
    ) as client:
        with pytest.raises(memplane.TransportError, match="ConnectError: refused"):
            await client.memory.clear(scope="user", scope_ref="u1")
        assert await client.health() is False
        assert await client.ready() is False


async def test_iter_pointers_walks_three_pages() -> None:
    recorder = Recorder(
        httpx.Response(200, json=page_json([pointer_json(key="a")], "c1")),
        httpx.Response(200, json=page_json([pointer_json(key="b")], "c2")),
        httpx.Response(200, json=page_json([pointer_json(key="c")])),
    )
    async with _client(recorder) as client:
        keys = [p.key async for p in client.memory.iter_pointers(scope="agent", limit=1)]

    assert keys == ["a", "b", "c"]
    assert [str(r.url) for r in recorder.requests] == [
        f"{BASE_URL}/v1/pointers?scope=agent&limit=1",
        f"{BASE_URL}/v1/pointers?scope=agent&limit=1&cursor=c1",
        f"{BASE_URL}/v1/pointers?scope=agent&limit=1&cursor=c2",
    ]


async def test_list_memories_asks_for_values_and_reads_value_and_pointer() -> None:
    item = {"value": {"likes": "tea"}, "pointer": pointer_json(key="a")}
    recorder = Recorder(httpx.Response(200, json=page_json([item], "c1")))
    async with _client(recorder) as client:
        page = await client.memory.list_memories(scope="user", scope_ref="u1", order="key",
                                                 limit=5)

    assert [(m.value, m.pointer.key) for m in page.items] == [({"likes": "tea"}, "a")]
    assert page.next_cursor == "c1"
    assert str(recorder.only.url) == (f"{BASE_URL}/v1/pointers?scope=user&scope_ref=u1"
                                      "&limit=5&order=key&include_values=true")


async def test_keys_tenants_and_audit_verify() -> None:
    recorder = Recorder(
        httpx.Response(201, json=key_json()),
        httpx.Response(204),
        httpx.Response(201, json=tenant_json()),
        httpx.Response(200, json=verification_json()),
    )
    async with _client(recorder) as client:
        key = await client.keys.create(role="admin", name="ops")
        await client.keys.delete(key.id)
        tenant = await client.tenants.create(name="acme")
        verification = await client.audit.verify()

    assert (key.id, tenant.tenant.id, verification.ok) == (KEY_ID, TENANT_ID, True)
    assert (verification.checked, verification.head_seq) == (3, 0)
    assert [(r.method, r.url.path) for r in recorder.requests] == [
        ("POST", "/v1/api-keys"),
        ("DELETE", f"/v1/api-keys/{KEY_ID}"),
        ("POST", "/v1/tenants"),
        ("GET", "/v1/audit/verify"),
    ]


async def test_aclose_closes_the_client_it_made_but_not_an_injected_one() -> None:
    own = _client(Recorder())
    async with own:
        pass
    async with httpx.AsyncClient(transport=httpx.MockTransport(Recorder())) as http:
        async with memplane.AsyncClient(BASE_URL, API_KEY, http_client=http):
            pass

        assert (own._http.is_closed, http.is_closed) == (True, False)
