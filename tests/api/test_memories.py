"""Memories by key through the SDK against a live server, on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest

import memplane
from tests.support.crypto import open_stored
from tests.support.service import Tenant


def _sha(value: object) -> str:
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()


def test_set_then_get_round_trips_value_and_pointer(tenant: Tenant) -> None:
    with tenant.client() as client:
        pointer = client.memory.set(scope="user", scope_ref="u1", key="preferred_language",
                                    value="fr", tags=["lang"], importance=4, agent_id="a1")
        memory = client.memory.get(scope="user", scope_ref="u1", key="preferred_language")

    assert memory.value == "fr"
    assert memory.pointer.id == pointer.id
    assert pointer.content_sha256 == _sha("fr")
    assert pointer.content_size == len(b'"fr"')
    assert (pointer.sync_status, pointer.version) == ("synced", 1)
    assert (pointer.tags, pointer.importance, pointer.agent_id) == (["lang"], 4, "a1")
    assert pointer.user_id == "u1"
    assert pointer.memory_type == "preference"
    assert [p.name for p in tenant.objects()] == [pointer.storage_path.rsplit("/", 1)[1]]


def test_overwrite_bumps_version_and_removes_superseded_object(tenant: Tenant) -> None:
    with tenant.client() as client:
        first = client.memory.set(scope="agent", scope_ref="bot", key="plan", value={"v": 1})
        second = client.memory.set(scope="agent", scope_ref="bot", key="plan", value={"v": 2})
        memory = client.memory.get(scope="agent", scope_ref="bot", key="plan")

    assert second.id == first.id
    assert second.version == 2
    assert second.storage_path != first.storage_path
    assert memory.value == {"v": 2}
    stored = tenant.objects()
    assert len(stored) == 1
    assert stored[0].as_posix().endswith(second.storage_path)
    blob = stored[0].read_bytes()
    assert b'"v"' not in blob  # encrypted at rest
    assert open_stored(tenant.stack.runtime, tenant.id, second.storage_path,
                       uuid.UUID(str(second.id)), blob) == b'{"v":2}'


def test_append_builds_a_list_in_order(tenant: Tenant) -> None:
    with tenant.client() as client:
        for n in range(3):
            pointer = client.memory.append(scope="user", scope_ref="u1", key="past_issues",
                                           value={"n": n})
        memory = client.memory.get(scope="user", scope_ref="u1", key="past_issues")
    assert memory.value == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert pointer.version == 3


def test_append_to_a_non_list_is_a_conflict_and_changes_nothing(tenant: Tenant) -> None:
    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="u1", key="name", value="Ada")
        with pytest.raises(memplane.Conflict) as caught:
            client.memory.append(scope="user", scope_ref="u1", key="name", value="x")
        assert client.memory.get(scope="user", scope_ref="u1", key="name").value == "Ada"
    assert caught.value.status_code == 409
    assert "not a list" in caught.value.detail


def test_delete_removes_pointer_and_object(tenant: Tenant) -> None:
    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="u1", key="k", value=1)
        client.memory.delete(scope="user", scope_ref="u1", key="k")
        with pytest.raises(memplane.NotFound):
            client.memory.get(scope="user", scope_ref="u1", key="k")
        with pytest.raises(LookupError):
            client.memory.delete(scope="user", scope_ref="u1", key="k")
        assert client.memory.list_pointers().items == []
    assert tenant.objects() == []


def test_clear_deletes_only_that_scope_ref(tenant: Tenant) -> None:
    with tenant.client() as client:
        for key in ("a", "b", "c"):
            client.memory.set(scope="conversation", scope_ref="c1", key=key, value=key)
        client.memory.set(scope="conversation", scope_ref="c2", key="a", value="keep")
        assert client.memory.clear(scope="conversation", scope_ref="c1") == 3
        remaining = client.memory.list_pointers()
        assert [(p.scope_ref, p.key) for p in remaining.items] == [("c2", "a")]
        assert client.memory.clear(scope="conversation", scope_ref="c1") == 0
    assert len(tenant.objects()) == 1


def test_institutional_is_the_tenant_scope(tenant: Tenant) -> None:
    with tenant.client() as client:
        client.memory.set(scope="institutional", key="policy", value="be kind")
        memory = client.memory.get(scope="tenant", scope_ref="-", key="policy")
    assert memory.value == "be kind"
    assert memory.pointer.scope == "tenant"


def test_odd_keys_are_one_segment_each(tenant: Tenant) -> None:
    keys = ["a/b", "ünï cödé", "50%off", "a%2Fb", "with space", "x" * 255]
    with tenant.client() as client:
        for key in keys:
            client.memory.set(scope="user", scope_ref="u/1", key=key, value=key)
        values = [client.memory.get(scope="user", scope_ref="u/1", key=k).value for k in keys]
        pointers = client.memory.list_pointers(scope="user", scope_ref="u/1").items
    assert values == keys
    assert sorted(p.key for p in pointers) == sorted(keys)
    prefix = f"tenants/{tenant.id}/memories/user/u%2F1/"
    for pointer in pointers:
        assert pointer.storage_path.startswith(prefix)
        assert pointer.storage_path[len(prefix):].count("/") == 1


def test_list_pointers_pages_with_a_cursor(tenant: Tenant) -> None:
    with tenant.client() as client:
        written = [client.memory.set(scope="user", scope_ref="u1", key=f"k{n:02}", value=n).id
                   for n in range(7)]
        first = client.memory.list_pointers(limit=3)
        second = client.memory.list_pointers(limit=3, cursor=first.next_cursor)
        third = client.memory.list_pointers(limit=3, cursor=second.next_cursor)
        every = [p.id for p in client.memory.iter_pointers(limit=2)]
    assert [len(first.items), len(second.items), len(third.items)] == [3, 3, 1]
    assert third.next_cursor is None
    assert [p.id for p in first.items + second.items + third.items] == written
    assert every == written


def test_list_pointers_filters(tenant: Tenant) -> None:
    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="u1", key="a", value=1, memory_type="fact")
        client.memory.set(scope="agent", scope_ref="bot", key="b", value=2, user_id="u1")
        client.memory.set(scope="agent", scope_ref="bot", key="c", value=3, user_id="u2")
        by_user = client.memory.list_pointers(user_id="u1").items
        by_scope = client.memory.list_pointers(scope="agent", scope_ref="bot").items
        by_type = client.memory.list_pointers(memory_type="fact").items
    assert sorted(p.key for p in by_user) == ["a", "b"]
    assert sorted(p.key for p in by_scope) == ["b", "c"]
    assert [p.key for p in by_type] == ["a"]


def test_tampered_object_is_never_served(tenant: Tenant) -> None:
    with tenant.client() as client:
        pointer = client.memory.set(scope="user", scope_ref="u1", key="secret", value="original")
        (tenant.stack.bucket_root / pointer.storage_path).write_bytes(b'"tampered"')
        with pytest.raises(memplane.HashMismatch) as caught:
            client.memory.get(scope="user", scope_ref="u1", key="secret")
        listed = client.memory.list_pointers(sync_status="corrupt").items
        failures = [e for e in client.audit.list(pointer_id=pointer.id).items if not e.success]

    error = caught.value
    assert error.status_code == 409
    assert error.pointer_id == str(pointer.id)
    assert error.expected_sha256 == pointer.content_sha256
    # A plaintext object where a sealed one belongs is refused before any hash is taken.
    assert error.actual_sha256 is None
    assert "could not be decrypted (the object is not encrypted" in error.detail
    assert "tampered" not in json.dumps(error.body)
    assert [p.id for p in listed] == [pointer.id]
    assert [(e.operation, e.detail.split(":")[0]) for e in failures] == [("read", "hash_mismatch")]


def test_missing_object_is_reported_not_served(tenant: Tenant) -> None:
    with tenant.client() as client:
        pointer = client.memory.set(scope="user", scope_ref="u1", key="gone", value=1)
        (tenant.stack.bucket_root / pointer.storage_path).unlink()
        with pytest.raises(memplane.HashMismatch) as caught:
            client.memory.get(scope="user", scope_ref="u1", key="gone")
    assert caught.value.actual_sha256 is None
    assert caught.value.expected_sha256 == pointer.content_sha256


def test_ttl_sets_expiry(tenant: Tenant) -> None:
    with tenant.client() as client:
        pointer = client.memory.set(scope="user", scope_ref="u1", key="t", value=1, ttl_days=2)
    assert pointer.expires_at is not None
    assert round((pointer.expires_at - pointer.updated_at).total_seconds()) == 2 * 86400
