"""A tenant's bucket cannot exhaust the server's memory or hold its threads: every read is
bounded by what the caller says the object may hold and ends at the call's deadline.

Each backend's adapter is pointed at a proxy in front of its real emulator; the object is
written honestly, then the proxy turns hostile on its download: a 1 GiB body (announced, or
chunked without a length), or the true body one byte at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from storage_adapters.bounded import DeadlineExceeded, ObjectTooLarge
from storage_adapters.registry import from_config
from tests.security.hostile_bucket import HostileBucket
from tests.support.emulators import Azurite, FakeGcsServer, MotoServer
from tests.support.service import Tenant

pytest_plugins = ["tests.support.emulator_fixtures"]

OBJECT = b"a memory of one hundred bytes, no more: " + b"." * 60
PATH = "memories/user/bob/diet"
# What the proxy may get into the socket before the client hangs up: the kernel's send and
# receive buffers plus one read step — far below the 1 GiB it offers.
MOST_SENT = 16 << 20


def _s3(moto_server: MotoServer) -> tuple[str, dict[str, Any], Callable[[str], bool]]:
    config = moto_server.config(f"hostile-{time.time_ns()}")
    moto_server.create_bucket(config["bucket"])
    bucket = config["bucket"]
    return "s3", config, lambda path: path.startswith(f"/{bucket}/")


def _gcs(gcs_server: FakeGcsServer) -> tuple[str, dict[str, Any], Callable[[str], bool]]:
    config = gcs_server.config(f"hostile-{time.time_ns()}")
    gcs_server.create_bucket(config["bucket"])
    config["use_batch"] = False
    return "gcs", config, lambda path: "alt=media" in path


def _azure(azurite: Azurite) -> tuple[str, dict[str, Any], Callable[[str], bool]]:
    config = azurite.config(f"hostile-{time.time_ns()}")
    azurite.create_bucket(config["container"])
    container = config["container"]
    return "azure", config, lambda path: f"/{container}/" in path and "comp=" not in path


def _through(storage_type: str, config: dict[str, Any], proxy: str, upstream: str
             ) -> dict[str, Any]:
    config = {**config, "read_timeout": 5, "max_attempts": 1}
    if storage_type == "s3":
        config["endpoint_url"] = proxy
    elif storage_type == "gcs":
        config["endpoint"] = proxy
    else:
        config["connection_string"] = config["connection_string"].replace(upstream, proxy)
    return config


@pytest.fixture(params=["s3", "gcs", "azure"])
def hostile(request: pytest.FixtureRequest) -> Iterator[tuple[Any, HostileBucket]]:
    """An adapter (call deadline 1 s) whose downloads go through a HostileBucket, with
    OBJECT stored at PATH."""
    server = request.getfixturevalue({"s3": "moto_server", "gcs": "gcs_server",
                                      "azure": "azurite_server"}[request.param])
    storage_type, config, downloads = {"s3": _s3, "gcs": _gcs, "azure": _azure}[
        request.param](server)
    with HostileBucket(server.endpoint, downloads) as proxy:
        adapter = from_config(storage_type, _through(storage_type, config, proxy.url,
                                                     server.endpoint), call_deadline=1.0)
        adapter.put(PATH, OBJECT)
        assert adapter.get(PATH, len(OBJECT)) == OBJECT  # honest while forwarding
        try:
            yield adapter, proxy
        finally:
            proxy.mode = "forward"
            adapter.close()


@pytest.mark.parametrize("mode", ["inflate", "inflate_chunked"])
def test_a_body_larger_than_the_object_may_be_is_refused_unread(
        hostile: tuple[Any, HostileBucket], mode: str) -> None:
    adapter, proxy = hostile
    proxy.mode = mode
    with pytest.raises(ObjectTooLarge):
        adapter.get(PATH, len(OBJECT))
    assert proxy.finished.wait(10)
    assert proxy.sent < MOST_SENT  # of 1 GiB offered


def test_a_streamed_read_is_bounded_too(hostile: tuple[Any, HostileBucket]) -> None:
    adapter, proxy = hostile
    proxy.mode = "inflate_chunked"
    with pytest.raises(ObjectTooLarge):
        list(adapter.iter_chunks(PATH, 1 << 20, len(OBJECT)))
    assert proxy.finished.wait(10)
    assert proxy.sent < MOST_SENT


def test_a_trickling_body_ends_at_the_call_deadline(hostile: tuple[Any, HostileBucket]
                                                    ) -> None:
    """One byte every 0.3 s never trips the 5 s read timeout; the 1 s deadline ends the
    read well before the 30 s the 100 bytes would take."""
    adapter, proxy = hostile
    proxy.mode, proxy.interval = "trickle", 0.3
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        adapter.get(PATH, len(OBJECT))
    assert time.monotonic() - started < 15
    assert proxy.finished.wait(10)
    assert proxy.sent < len(OBJECT)


def test_an_oversized_memory_is_a_hash_mismatch_over_http(tenant: Tenant,
                                                         moto_server: MotoServer) -> None:
    """End to end: a tenant's S3 bucket answers a memory's read with 1 GiB (no length); the
    read is 409 hash_mismatch (reason ``mismatch``), the pointer marked corrupt, and the
    server took no more than the socket buffers of it. Once the bucket is honest again the
    memory reads back."""
    bucket = f"e2e-{tenant.id.hex[:12]}"
    moto_server.create_bucket(bucket)
    with HostileBucket(moto_server.endpoint, lambda p: p.startswith(f"/{bucket}/")) as proxy:
        config = {"storage_type": "s3", "connection_config": {
            "bucket": bucket, "region": "us-east-1", "endpoint_url": proxy.url,
            "access_key_id": "AKIATENANT", "secret_access_key": "tenant-secret"}}
        with tenant.stack.http(tenant.admin_key) as http:
            assert http.put("/v1/storage/config", json=config).status_code == 200
            assert http.put("/v1/memories/user/bob/diet",
                            json={"value": "vegetarian"}).status_code in (200, 201)
            proxy.mode = "inflate_chunked"
            hostile = http.get("/v1/memories/user/bob/diet")
            sent = proxy.sent
            proxy.mode = "forward"
            honest = http.get("/v1/memories/user/bob/diet")
    assert hostile.status_code == 409
    body = hostile.json()
    assert (body["error"], body["reason"], body["actual_sha256"]) == (
        "hash_mismatch", "mismatch", None)
    assert body["detail"] == ("the stored object is larger than its pointer allows; it was "
                              "not served and the pointer is marked corrupt")
    assert 0 < sent < MOST_SENT
    assert honest.status_code == 200
    assert honest.json()["value"] == "vegetarian"
