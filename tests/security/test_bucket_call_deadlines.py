"""Every call to a tenant's bucket ends by its deadline, and no answer of the bucket is read
past a ceiling — not only object bodies: a HEAD, a listing, a put, a metadata document.

Each backend's adapter is pointed at a HostileBucket in front of its real emulator, once
as a tenant's adapter is built (guarded connections, an endpoint policy that lets the test
reach 127.0.0.1) and once as the operator's default bucket is (the server's own
credentials, no guard). The proxy then sends the answer to one kind of request with its
status line and headers one byte at a time (which no per-read timeout ever trips), or with
a body of 1 GiB. The clients may retry (``max_attempts`` 10): the retries count against
the same deadline, and stop when it has passed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from storage_adapters.deadlines import (
    RESPONSE_CEILING_BYTES,
    DeadlineExceeded,
    ResponseTooLarge,
)
from storage_adapters.netguard import EndpointPolicy
from storage_adapters.registry import from_config
from tests.security.hostile_bucket import HostileBucket
from tests.support.emulators import Azurite, FakeGcsServer, MotoServer

pytest_plugins = ["tests.support.emulator_fixtures"]

DEADLINE = 1.0
SETUP_DEADLINE = 30.0
HONEST_DEADLINE = 30.0
PATH = "memories/user/bob/diet"
OBJECT = b"a small memory"
INTERVAL = 0.2  # one header byte each: a few hundred bytes would take a minute or more
# What the proxy may get into the socket past the ceiling before the client hangs up: the
# kernel's send and receive buffers plus a read step.
MOST_SENT = RESPONSE_CEILING_BYTES + (12 << 20)
# What the proxy has got into the socket once the client read past the ceiling: the client
# counts the chunked framing too, so the payload written may fall short of it by that much
# (a few bytes per 64 KiB block, and the headers).
CEILING_REACHED = RESPONSE_CEILING_BYTES - (64 << 10)
ATTEMPTS = 10  # a tenant may ask for many; they all count against the one deadline
GUARD = EndpointPolicy.from_entries(["127.0.0.1/32"])

Targets = Callable[[str, str], bool]


def _s3(server: MotoServer) -> tuple[str, dict[str, Any], dict[str, Targets]]:
    config = server.config(f"slow-{time.time_ns()}")
    server.create_bucket(config["bucket"])
    return "s3", config, {
        "head": lambda method, path: method == "HEAD",
        "list": lambda method, path: method == "GET" and "list-type=2" in path,
        "put": lambda method, path: method == "PUT",
    }


def _gcs(server: FakeGcsServer) -> tuple[str, dict[str, Any], dict[str, Targets]]:
    config = server.config(f"slow-{time.time_ns()}")
    server.create_bucket(config["bucket"])
    config["use_batch"] = False
    return "gcs", config, {  # metadata and listings are JSON documents the library reads
        "head": lambda method, path: (method == "GET" and "/o/" in path
                                      and "alt=media" not in path),
        "list": lambda method, path: method == "GET" and "/o?" in path,
        "put": lambda method, path: method == "POST" and "/upload/" in path,
    }


def _azure(server: Azurite) -> tuple[str, dict[str, Any], dict[str, Targets]]:
    config = server.config(f"slow-{time.time_ns()}")
    server.create_bucket(config["container"])
    return "azure", config, {
        "head": lambda method, path: method == "HEAD",
        "list": lambda method, path: method == "GET" and "comp=list" in path,
        "put": lambda method, path: method == "PUT",
    }


def _through(storage_type: str, config: dict[str, Any], proxy: str, upstream: str
             ) -> dict[str, Any]:
    config = {**config, "read_timeout": 5, "max_attempts": ATTEMPTS}
    if storage_type == "s3":
        config["endpoint_url"] = proxy
    elif storage_type == "gcs":
        config["endpoint"] = proxy
    else:
        config["connection_string"] = config["connection_string"].replace(upstream, proxy)
    return config


Hostile = tuple[Any, HostileBucket, dict[str, Targets]]


@pytest.fixture(params=[("s3", "tenant"), ("gcs", "tenant"), ("azure", "tenant"),
                        ("s3", "operator"), ("gcs", "operator"), ("azure", "operator")],
                ids=lambda p: f"{p[0]}-{p[1]}")
def hostile(request: pytest.FixtureRequest) -> Iterator[Hostile]:
    """An adapter (call deadline 1 s) whose requests go through a HostileBucket, OBJECT
    stored at PATH: a tenant's (guarded) or the operator's (ambient, unguarded)."""
    backend, whose = request.param
    server = request.getfixturevalue({"s3": "moto_server", "gcs": "gcs_server",
                                      "azure": "azurite_server"}[backend])
    storage_type, config, targets = {"s3": _s3, "gcs": _gcs, "azure": _azure}[backend](server)
    with HostileBucket(server.endpoint, lambda path: False) as proxy:
        config = _through(storage_type, config, proxy.url, server.endpoint)
        whom: dict[str, Any] = ({"endpoint_policy": GUARD} if whose == "tenant"
                                else {"allow_ambient_credentials": True})
        # The object is stored through an adapter with a generous deadline: on a loaded
        # machine an honest emulator may take longer than the 1 s the test is about.
        setup = from_config(storage_type, config, call_deadline=SETUP_DEADLINE, **whom)
        try:
            setup.put(PATH, OBJECT)
            assert setup.head(PATH).size == len(OBJECT)  # honest while forwarding
        finally:
            setup.close()
        deadline = HONEST_DEADLINE if request.function is HONEST_TEST else DEADLINE
        adapter = from_config(storage_type, config, call_deadline=deadline, **whom)
        try:
            yield adapter, proxy, targets
        finally:
            proxy.targets = None
            adapter.close()


CALLS: dict[str, Callable[[Any], object]] = {
    "head": lambda adapter: adapter.head(PATH),
    "list": lambda adapter: list(adapter.list("memories/")),
    "put": lambda adapter: adapter.put("memories/user/bob/other", OBJECT),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_slow_headers_end_at_the_call_deadline(hostile: Hostile, call: str) -> None:
    """The answer's headers arrive a byte every 0.2 s (never a 5 s read timeout): the call
    ends with DeadlineExceeded soon after its 1 s deadline, retries included, and the
    connection is closed — where the headers alone would take a minute."""
    adapter, proxy, targets = hostile
    proxy.mode, proxy.interval, proxy.targets = "slow_headers", INTERVAL, targets[call]
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded) as refused:
        CALLS[call](adapter)
    took = time.monotonic() - started
    assert "took longer than its 1 s deadline" in str(refused.value)
    assert took < DEADLINE * 3 + 2
    assert proxy.finished.wait(10)
    assert proxy.hung_up  # the client closed the connection
    assert proxy.offered * INTERVAL > 5 * (DEADLINE * 3 + 2)  # the headers take a minute
    assert proxy.sent < (took + 1) / INTERVAL + 2  # and were cut off in time


def test_an_inflated_listing_is_refused_at_the_ceiling(hostile: Hostile) -> None:
    """A listing answered with 1 GiB (chunked) is refused once 16 MiB have arrived: a
    StorageError saying so, no retry, and the proxy got little more than that out."""
    adapter, proxy, targets = hostile
    proxy.mode, proxy.targets = "inflate_answer", targets["list"]
    with pytest.raises(ResponseTooLarge) as refused:
        list(adapter.list("memories/"))
    assert str(refused.value).endswith(
        "memories/: the bucket's answer was larger than 16 MiB; it was not read (this server "
        "refuses answers that large)")
    assert proxy.finished.wait(10)
    assert CEILING_REACHED <= proxy.sent < MOST_SENT  # of 1 GiB offered


METADATA: dict[str, tuple[Targets, Callable[[Any], object]]] = {
    # S3: the bucket's versioning document; GCS: the object's metadata; Azure: the
    # account's blob service properties (what ``describe`` reads)
    "s3": (lambda method, path: method == "GET" and "versioning" in path,
           lambda adapter: adapter.describe()),
    "gs": (lambda method, path: method == "GET" and "/o/" in path and "alt=" not in path,
           lambda adapter: adapter.head(PATH)),
    "az": (lambda method, path: method == "GET" and "comp=properties" in path,
           lambda adapter: adapter.describe()),
}


def test_an_inflated_metadata_document_is_refused_at_the_ceiling(hostile: Hostile) -> None:
    """The same for a metadata document the client library parses whole."""
    adapter, proxy, _ = hostile
    proxy.targets, call = METADATA[adapter.scheme]
    proxy.mode = "inflate_answer"
    with pytest.raises(ResponseTooLarge) as refused:
        call(adapter)
    assert "the bucket's answer was larger than 16 MiB; it was not read" in str(refused.value)
    assert proxy.finished.wait(10)
    assert CEILING_REACHED <= proxy.sent < MOST_SENT


def test_an_honest_bucket_still_answers_every_call(hostile: Hostile) -> None:
    adapter, _, _ = hostile
    assert [o.path for o in adapter.list("memories/")] == [PATH]
    assert adapter.get(PATH, len(OBJECT)) == OBJECT
    assert adapter.delete_many([PATH]) == 1
    assert list(adapter.list("memories/")) == []


# The honest bucket's calls run under a deadline of their own: on a loaded machine an honest
# emulator behind the proxy may take longer than the 1 s the hostile tests are about.
HONEST_TEST = test_an_honest_bucket_still_answers_every_call
