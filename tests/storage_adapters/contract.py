"""The storage adapter contract: one suite every backend's test class subclasses.

A subclass supplies the ``adapter`` fixture and the facts that legitimately differ between
backends (batch sizes, what an out-of-band overwrite reads back as); every assertion is exact.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import pytest

from storage_adapters.base import (
    InvalidPath,
    ObjectExists,
    ObjectNotFound,
    StorageAdapter,
    StorageAuthError,
    StorageUnavailable,
)

SIZES = [0, 1, 1000, 256 * 1024 + 3, 5 * 1024 * 1024]
INVALID_PATHS = ["../x", "/abs", "a//b", "a\x00b", "", "a/./b", "a/../b", "a/"]
UNICODE_PATHS = ["ünï/cødé/日本語.txt", "emoji/🙂 smile", "sp ace/plus+sign/percent%20x"]


class AdapterContract:
    backend: ClassVar[str]
    # The request kind and objects per request a delete is counted as.
    delete_kind: ClassVar[str] = "delete"
    delete_limit: ClassVar[int] = 1

    @pytest.fixture
    def adapter(self) -> Iterator[StorageAdapter]:
        raise NotImplementedError

    def tamper(self, adapter: Any, path: str, data: bytes) -> None:
        """Overwrite the stored object behind the adapter's back, as its owner could.

        Every backend then stores a checksum of the new bytes, so ``get`` returns them: the
        backend checksum guards transfer and storage, not replacement. The service's own
        SHA-256 of the plaintext is what catches this.
        """
        raise NotImplementedError

    # -- put / get / head -------------------------------------------------------------

    @pytest.mark.parametrize("size", SIZES, ids=lambda n: f"{n}B")
    def test_round_trip(self, adapter: StorageAdapter, size: int) -> None:
        data = os.urandom(size)
        adapter.put("docs/blob.bin", data)
        assert adapter.get("docs/blob.bin") == data
        assert adapter.head("docs/blob.bin").size == size

    def test_one_request_per_small_operation(self, adapter: StorageAdapter) -> None:
        adapter.stats.reset()
        adapter.put("counted/x", b"payload")
        adapter.get("counted/x")
        adapter.head("counted/x")
        assert dict(adapter.stats.counts) == {"put": 1, "get": 1, "head": 1}

    def test_put_is_create_only(self, adapter: StorageAdapter) -> None:
        adapter.put("once/key", b"original")
        with pytest.raises(ObjectExists) as info:
            adapter.put("once/key", b"replacement")
        assert isinstance(info.value, FileExistsError)
        assert adapter.get("once/key") == b"original"

    def test_missing_object(self, adapter: StorageAdapter) -> None:
        with pytest.raises(ObjectNotFound) as got:
            adapter.get("missing/key")
        with pytest.raises(ObjectNotFound) as headed:
            adapter.head("missing/key")
        assert isinstance(got.value, FileNotFoundError)
        assert isinstance(headed.value, FileNotFoundError)

    @pytest.mark.parametrize("path", INVALID_PATHS, ids=repr)
    def test_invalid_paths_are_refused(self, adapter: StorageAdapter, path: str) -> None:
        adapter.stats.reset()
        for call in (lambda: adapter.put(path, b"x"), lambda: adapter.get(path),
                     lambda: adapter.head(path), lambda: adapter.delete_many([path])):
            with pytest.raises(InvalidPath):
                call()
        assert adapter.stats.total == 0

    @pytest.mark.parametrize("path", UNICODE_PATHS)
    def test_unicode_paths_round_trip(self, adapter: StorageAdapter, path: str) -> None:
        adapter.put(path, path.encode())
        assert adapter.get(path) == path.encode()
        assert [info.path for info in adapter.list(path.split("/")[0] + "/")] == [path]

    # -- delete -----------------------------------------------------------------------

    def test_delete_missing_succeeds(self, adapter: StorageAdapter) -> None:
        adapter.put("gone/present", b"1")
        assert adapter.delete_many(["gone/never-existed", "gone/present"]) == 2
        with pytest.raises(ObjectNotFound):
            adapter.get("gone/present")
        assert adapter.delete_many(["gone/present"]) == 1

    @pytest.mark.slow
    def test_delete_many_batches_within_the_limit(self, adapter: StorageAdapter) -> None:
        # Two full batches and a partial one (single deletes: enough to run side by side).
        n = max(2 * self.delete_limit + 7, 60)
        paths = [f"bulk/{i:05d}" for i in range(n)]
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda p: adapter.put(p, p.encode()), paths))
        assert sorted(info.path for info in adapter.list("bulk/")) == paths
        adapter.stats.reset()
        assert adapter.delete_many(paths) == n
        assert dict(adapter.stats.counts) == {self.delete_kind: math.ceil(n / self.delete_limit)}
        assert list(adapter.list("bulk/")) == []

    # -- listing ----------------------------------------------------------------------

    def test_list_by_prefix(self, adapter: StorageAdapter) -> None:
        content = {"a/b/1": b"1", "a/b/2": b"22", "a/b/c/3": b"333", "a/bc/4": b"4444",
                   "z/5": b"55555"}
        for path, data in content.items():
            adapter.put(path, data)
        listing = {info.path: info.size for info in adapter.list("a/b/")}
        assert listing == {"a/b/1": 1, "a/b/2": 2, "a/b/c/3": 3}
        assert {info.path for info in adapter.list("a/bc/")} == {"a/bc/4"}
        assert {info.path for info in adapter.list("a/b")} == {"a/b/1", "a/b/2", "a/b/c/3",
                                                               "a/bc/4"}
        assert {info.path for info in adapter.list("")} == set(content)
        assert list(adapter.list("nothing/")) == []

    def test_list_is_lazy(self, adapter: StorageAdapter) -> None:
        adapter.put("lazy/1", b"1")
        adapter.stats.reset()
        listing = adapter.list("lazy/")
        assert adapter.stats.total == 0
        assert [info.path for info in listing] == ["lazy/1"]
        assert adapter.stats.counts["list"] == 1

    def test_list_versions_and_purge(self, adapter: StorageAdapter) -> None:
        for path in ("v/1", "v/2", "w/3"):
            adapter.put(path, b"data")
        versions = list(adapter.list_versions("v/"))
        assert sorted(v.path for v in versions) == ["v/1", "v/2"]
        assert all(v.is_latest and not v.is_delete_marker and v.size == 4 for v in versions)
        assert adapter.purge_versions("v/") == 2
        assert list(adapter.list_versions("v/")) == []
        assert [info.path for info in adapter.list("")] == ["w/3"]

    # -- bucket settings and health ---------------------------------------------------

    def test_describe(self, adapter: StorageAdapter) -> None:
        description = adapter.describe()
        assert description.backend == self.backend
        assert description.versioning is False

    def test_health_check(self, adapter: StorageAdapter) -> None:
        report = adapter.health_check()
        assert report.ok is True, report.detail
        assert report.latency_ms > 0
        assert report.description is not None
        assert report.description.backend == self.backend
        assert list(adapter.list_versions("health/")) == []

    # -- integrity --------------------------------------------------------------------

    def test_tampered_object(self, adapter: StorageAdapter) -> None:
        adapter.put("tamper/key", b"original bytes")
        self.tamper(adapter, "tamper/key", b"tampered bytes")
        assert adapter.get("tamper/key") == b"tampered bytes"


class RemoteContract(AdapterContract):
    """Network backends: outages, missing buckets and credentials."""

    @pytest.fixture
    def unreachable(self) -> StorageAdapter:
        """The adapter pointed at a closed port on 127.0.0.1."""
        raise NotImplementedError

    @pytest.fixture
    def missing_bucket(self) -> tuple[StorageAdapter, str]:
        """An adapter for a bucket that does not exist, and that bucket's name."""
        raise NotImplementedError

    def test_unreachable_endpoint_is_unavailable(self, unreachable: StorageAdapter) -> None:
        calls: list[Callable[[], object]] = [
            lambda: unreachable.get("x"), lambda: unreachable.put("x", b"1"),
            lambda: unreachable.delete_many(["x"]), lambda: list(unreachable.list("")),
        ]
        for call in calls:
            with pytest.raises(StorageUnavailable):
                call()
        report = unreachable.health_check()
        assert report.ok is False
        assert report.detail.startswith("StorageUnavailable")

    def test_missing_bucket_is_named(self, missing_bucket: tuple[StorageAdapter, str]) -> None:
        adapter, name = missing_bucket
        for call in (lambda: adapter.get("x"), lambda: adapter.head("x"),
                     lambda: adapter.put("x", b"1"), lambda: adapter.delete_many(["x"]),
                     lambda: list(adapter.list("")), adapter.describe):
            with pytest.raises(StorageUnavailable, match=f"'{name}' does not exist"):
                call()


    def test_a_put_that_finds_its_own_bytes_is_done_and_other_bytes_are_refused(
            self, adapter: StorageAdapter) -> None:
        """The client retries a create-only put whose answer was lost (a read timeout), and
        the retry finds the first attempt's object: the same bytes are the put done, not a
        conflict (the soak saw 500s from it); other bytes are still refused."""
        adapter.put("retried/key", b"exactly these bytes")
        adapter.stats.reset()
        adapter.put("retried/key", b"exactly these bytes")
        assert dict(adapter.stats.counts) == {"put": 1, "get": 1}
        for other in (b"exactly these byteS", b"exactly these bytes and more", b"exactly"):
            with pytest.raises(ObjectExists):
                adapter.put("retried/key", other)
        assert adapter.get("retried/key") == b"exactly these bytes"


def assert_auth_error_hides(call: Callable[[], object], *secrets: str) -> None:
    with pytest.raises(StorageAuthError) as info:
        call()
    text = str(info.value) + repr(info.value)
    for secret in secrets:
        assert secret not in text
