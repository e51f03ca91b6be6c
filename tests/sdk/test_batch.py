"""client.memory.set_many / get_many (sync and async) against a live server, on SQLite and
PostgreSQL: typed results in the order given, failures as results, chunks of 1,000."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest

import memplane
from control_plane.db.models import SubjectErasure
from memplane import _batch
from tests.support.service import Tenant


def _sha(value: object) -> str:
    return hashlib.sha256(json.dumps(value, separators=(",", ":")).encode()).hexdigest()


def test_set_many_then_get_many_round_trips_typed_results(tenant: Tenant) -> None:
    with tenant.client() as client:
        written = client.memory.set_many([
            {"scope": "user", "scope_ref": "u1", "key": "lang", "value": "fr",
             "tags": ["lang"], "importance": 4},
            {"scope": "tenant", "key": "motto", "value": {"m": 1}},
            {"scope": "user", "scope_ref": "u1", "key": "bad/../key", "value": 1,
             "importance": 9},
        ])
        read = client.memory.get_many([("user", "u1", "lang"),
                                       {"scope": "tenant", "scope_ref": "-", "key": "motto"},
                                       ("user", "u1", "nope")])
        single = client.memory.get(scope="user", scope_ref="u1", key="lang")

    assert [(r.index, r.op, r.status, r.ok) for r in written] == [
        (0, "set", 200, True), (1, "set", 200, True), (2, "set", 422, False)]
    assert isinstance(written[0].pointer, memplane.Pointer)
    assert written[0].pointer == single.pointer
    assert (written[0].pointer.tags, written[0].pointer.content_sha256) == (["lang"], _sha("fr"))
    assert written[1].pointer is not None and written[1].pointer.scope_ref == "-"
    assert (written[2].error, written[2].detail) == (
        "validation_error", "importance: Input should be less than or equal to 5")
    assert [(r.status, r.value) for r in read] == [(200, "fr"), (200, {"m": 1}), (404, None)]
    assert read[0].pointer == single.pointer
    assert read[2].detail == "no memory at user/u1 key=nope"
    with pytest.raises(memplane.NotFound) as caught:
        read[2].raise_for_error()
    assert (caught.value.status_code, caught.value.code) == (404, "not_found")
    assert read[0].raise_for_error() is read[0]
    assert isinstance(written[2].exception(), memplane.BadRequest)


def test_the_sdk_sends_as_many_operations_a_request_as_the_server_takes() -> None:
    from control_plane.memories import batch

    assert _batch.MAX_OPERATIONS == batch.MAX_OPERATIONS == 1000


def test_more_items_than_a_request_takes_go_in_several_requests_in_order(
        tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    # Chunks of 20 instead of 1,000: the same splitting, a fiftieth of the writes.
    monkeypatch.setattr(_batch, "MAX_OPERATIONS", 20)
    items = [{"scope": "agent", "scope_ref": "bot", "key": f"k{i:04d}", "value": i}
             for i in range(41)]
    sent: list[int] = []
    with tenant.client() as client:
        client._http.event_hooks["request"].append(  # type: ignore[attr-defined]
            lambda request: sent.append(len(json.loads(request.content)["operations"])))
        written = client.memory.set_many(items, idempotency_key="many-1")
        again = client.memory.set_many(items, idempotency_key="many-1")
        read = client.memory.get_many([("agent", "bot", "k0000"), ("agent", "bot", "k0040")])
    assert sent == [20, 20, 1, 20, 20, 1, 2]
    assert [r.index for r in written] == list(range(41))
    assert {r.status for r in written} == {200}
    assert [r.pointer.version for r in again if r.pointer] == [1] * 41
    assert [r.value for r in read] == [0, 40]


def test_erasure_409_is_the_single_requests_exception(tenant: Tenant) -> None:
    with tenant.stack.runtime.sessions() as session:
        session.add(SubjectErasure(tenant_id=tenant.id, user_id="u9", job_id=uuid.uuid4()))
        session.commit()
    try:
        with tenant.client() as client:
            (result,) = client.memory.set_many([{"scope": "user", "scope_ref": "u9",
                                                 "key": "k", "value": 1}])
    finally:
        with tenant.stack.runtime.sessions() as session:
            session.execute(SubjectErasure.__table__.delete().where(
                SubjectErasure.tenant_id == tenant.id))
            session.commit()
    assert (result.status, result.error) == (409, "subject_erasure_in_progress")
    assert isinstance(result.exception(), memplane.SubjectErasureInProgress)


def test_items_are_checked_before_anything_is_sent(tenant: Tenant) -> None:
    with tenant.client() as client:
        with pytest.raises(TypeError, match="item 1: unexpected field"):
            client.memory.set_many([{"scope": "user", "scope_ref": "u", "key": "a", "value": 1},
                                    {"scope": "user", "scope_ref": "u", "key": "b",
                                     "valeu": 1}])
        with pytest.raises(TypeError, match="item 0: unexpected field"):
            client.memory.get_many([{"scope": "user", "scope_ref": "u", "key": "a",
                                     "value": 1}])
        assert client.memory.list_pointers().items == []


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_async_client_sends_the_same_batches(tenant: Tenant, anyio_backend: str) -> None:
    async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
        written = await client.memory.set_many([
            {"scope": "user", "scope_ref": "u1", "key": "a", "value": [1, 2]},
            {"scope": "user", "scope_ref": "u1", "key": "a", "value": [3]}])
        read = await client.memory.get_many([("user", "u1", "a"), ("user", "u1", "b")])
    assert [(r.status, r.pointer.version if r.pointer else None) for r in written] == [
        (200, 1), (200, 2)]
    assert [(r.status, r.value) for r in read] == [(200, [3]), (404, None)]
    assert isinstance(read[1].exception(), memplane.NotFound)
