"""The memory service end to end through the SDK, on each backend a tenant can bring:
a local directory, S3 (moto), GCS (fake-gcs-server) and Azure Blob (Azurite).

Each test configures its tenant's storage with ``client.storage.configure`` and then checks
the bucket itself with the backend's raw client.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import memplane
from tests.support.buckets import BACKEND_NAMES, RawBucket
from tests.support.service import BOOTSTRAP_KEY, ServerThread, Tenant, make_settings

backends = pytest.mark.parametrize("raw_bucket", BACKEND_NAMES, indirect=True)


def configure(client: memplane.Client, bucket: RawBucket) -> memplane.StorageConfig:
    return client.storage.configure(storage_type=bucket.name,
                                    connection_config=bucket.connection_config)


@backends
def test_set_append_get_overwrite_delete_clear(raw_bucket: RawBucket, tenant: Tenant) -> None:
    with tenant.client() as client:
        config = configure(client, raw_bucket)
        prefix = f"memplane/{tenant.id}"
        assert (config.storage_type, config.prefix, config.is_active) == (
            raw_bucket.name, prefix, True)
        assert client.storage.get_config().id == config.id
        health = client.storage.health_check()
        assert (health.ok, health.reachable, health.config_id) == (True, True, config.id)

        prefs = client.memory.set(scope="user", scope_ref="u1", key="prefs",
                                  value={"tone": "brief"})
        assert raw_bucket.keys() == [f"{prefix}/{prefs.storage_path}"]
        client.memory.append(scope="user", scope_ref="u1", key="log", value="a")
        log = client.memory.append(scope="user", scope_ref="u1", key="log", value="b")
        assert client.memory.get(scope="user", scope_ref="u1", key="log").value == ["a", "b"]
        assert client.memory.get(scope="user", scope_ref="u1", key="prefs").value == {
            "tone": "brief"}

        prefs2 = client.memory.set(scope="user", scope_ref="u1", key="prefs",
                                   value={"tone": "long"})
        assert prefs2.version == 2
        assert client.memory.get(scope="user", scope_ref="u1", key="prefs").value == {
            "tone": "long"}
        # Superseded versions are gone from the bucket: one object per live memory.
        assert raw_bucket.keys() == sorted(
            [f"{prefix}/{prefs2.storage_path}", f"{prefix}/{log.storage_path}"])

        page = client.memory.list_pointers(scope="user", scope_ref="u1")
        assert sorted((p.key, p.version, p.sync_status) for p in page.items) == [
            ("log", 2, "synced"), ("prefs", 2, "synced")]

        client.memory.delete(scope="user", scope_ref="u1", key="prefs")
        with pytest.raises(memplane.NotFound):
            client.memory.get(scope="user", scope_ref="u1", key="prefs")
        assert raw_bucket.keys() == [f"{prefix}/{log.storage_path}"]

        other = client.memory.set(scope="user", scope_ref="u2", key="k", value=1)
        assert client.memory.clear(scope="user", scope_ref="u1") == 1
        assert client.memory.list_pointers(scope="user", scope_ref="u1").items == []
        assert raw_bucket.keys() == [f"{prefix}/{other.storage_path}"]


@backends
def test_tampered_object_is_refused_with_hash_mismatch(raw_bucket: RawBucket,
                                                       tenant: Tenant) -> None:
    with tenant.client() as client:
        config = configure(client, raw_bucket)
        pointer = client.memory.set(scope="agent", scope_ref="a1", key="plan", value=[1, 2])
        raw_bucket.overwrite(f"{config.prefix}/{pointer.storage_path}", b'["tampered"]')
        with pytest.raises(memplane.HashMismatch) as caught:
            client.memory.get(scope="agent", scope_ref="a1", key="plan")
        assert caught.value.status_code == 409
        assert caught.value.pointer_id == pointer.id
        assert caught.value.expected_sha256 == pointer.content_sha256
        [listed] = client.memory.list_pointers(scope="agent", scope_ref="a1").items
        assert listed.sync_status == "corrupt"


MOVES = [("local", "s3"), ("s3", "gcs"), ("gcs", "azure"), ("azure", "local")]


@pytest.mark.parametrize(("raw_bucket", "second_bucket"), MOVES, indirect=True,
                         ids=[f"{a}-to-{b}" for a, b in MOVES])
def test_changing_backend_keeps_old_memories_and_writes_new_ones_to_the_new_bucket(
        raw_bucket: RawBucket, second_bucket: RawBucket, tenant: Tenant) -> None:
    with tenant.client() as client:
        first = configure(client, raw_bucket)
        old = client.memory.set(scope="team", scope_ref="t1", key="old", value="before")
        moved = client.memory.set(scope="team", scope_ref="t1", key="moved", value="v1")

        second = configure(client, second_bucket)
        assert second.id != first.id
        assert client.storage.get_config().id == second.id

        # Written before the change: still read from where it was written.
        assert client.memory.get(scope="team", scope_ref="t1", key="old").value == "before"
        new = client.memory.set(scope="team", scope_ref="t1", key="new", value="after")
        moved2 = client.memory.set(scope="team", scope_ref="t1", key="moved", value="v2")
        assert client.memory.get(scope="team", scope_ref="t1", key="new").value == "after"
        assert client.memory.get(scope="team", scope_ref="t1", key="moved").value == "v2"

        # Where each pointer says its object is: a write that went to a bucket the tenant
        # had left (a stale cached active configuration) shows here, before the listings.
        assert _pointer_configs(tenant) == {"old": first.id, "moved": second.id,
                                            "new": second.id}
        assert tenant.objects() == []  # nothing of it in the server's default bucket
        prefix = f"memplane/{tenant.id}"
        root = getattr(raw_bucket, "root", None)
        assert root is None or root.is_dir(), f"the first bucket's directory {root} is gone"
        assert raw_bucket.keys() == [f"{prefix}/{old.storage_path}"]
        assert second_bucket.keys() == sorted(
            [f"{prefix}/{new.storage_path}", f"{prefix}/{moved2.storage_path}"])
        assert moved.storage_path != moved2.storage_path


def _pointer_configs(tenant: Tenant) -> dict[str, str]:
    """Each of the tenant's memory keys and the storage configuration its pointer names."""
    from sqlalchemy import select

    from control_plane.db.models import MemoryPointer

    with tenant.stack.runtime.sessions() as session:
        rows = session.execute(select(MemoryPointer.key, MemoryPointer.storage_config_id)
                               .where(MemoryPointer.tenant_id == tenant.id)).all()
    return {key: str(config_id) for key, config_id in rows}


@pytest.fixture(scope="module")
def embedded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The embedded default (SQLite) on its own, so the timing loop runs once per backend."""
    server = ServerThread(make_settings("sqlite", tmp_path_factory.mktemp("timing"))).start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()


@backends
def test_timing_of_sets_and_gets_through_the_service(raw_bucket: RawBucket,
                                                     embedded_server: str) -> None:
    """Not a benchmark with a floor: prints what one short loop saw (run with -s)."""
    n = 100
    with memplane.Client(embedded_server, BOOTSTRAP_KEY) as admin:
        created = admin.tenants.create(name="timing")
    with memplane.Client(embedded_server, created.api_key) as client:
        config = configure(client, raw_bucket)
        started = time.perf_counter()
        for i in range(n):
            client.memory.set(scope="agent", scope_ref="bench", key=f"k{i}", value={"i": i})
        put_s = time.perf_counter() - started
        started = time.perf_counter()
        for i in range(n):
            assert client.memory.get(scope="agent", scope_ref="bench", key=f"k{i}").value == {
                "i": i}
        get_s = time.perf_counter() - started
    print(f"\n[timing] {raw_bucket.name:<6} sqlite: {n} sets {n / put_s:6.1f}/s "
          f"({1000 * put_s / n:.1f} ms each), {n} gets {n / get_s:6.1f}/s "
          f"({1000 * get_s / n:.1f} ms each)")
    assert len(raw_bucket.keys(config.prefix + "/memories/")) == n
