"""The adapter contract run against every backend: local disk, memory, and the S3, GCS and
Azure emulators. Backend-specific facts (native checksums, versioned buckets, credential
checks) are tested in the backend's own class, next to the shared suite."""

from __future__ import annotations

import base64
import ctypes
import errno
import hashlib
import io
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storage_adapters import localfiles
from storage_adapters.base import (
    IntegrityError,
    ObjectExists,
    StorageAdapter,
    StorageUnavailable,
)
from storage_adapters.local import LocalAdapter
from storage_adapters.memory import MemoryAdapter
from tests.support.emulators import (
    Azurite,
    FakeGcsServer,
    MotoServer,
    closed_port,
    unique_name,
)

from .contract import AdapterContract, RemoteContract, assert_auth_error_hides


class TestLocalContract(AdapterContract):
    backend = "local"

    @pytest.fixture
    def adapter(self, tmp_path: Path) -> Iterator[StorageAdapter]:
        adapter = LocalAdapter(tmp_path / "bucket")
        yield adapter
        adapter.close()

    def tamper(self, adapter: Any, path: str, data: bytes) -> None:
        (adapter.root / path).write_bytes(data)

    def test_put_many_stores_each_object_and_answers_per_item(
            self, adapter: LocalAdapter) -> None:
        adapter.put("a/1", b"first")
        answers = adapter.put_many([("m/1", b"one"), ("a/1", b"again"), ("m/2/x", b"two"),
                                    ("../out", b"escape")])
        assert [type(a).__name__ if a is not None else None for a in answers] == [
            None, "ObjectExists", None, "InvalidPath"]
        assert (adapter.get("m/1"), adapter.get("a/1"), adapter.get("m/2/x")) == (
            b"one", b"first", b"two")
        assert not (adapter.root.parent / "out").exists()
        assert list((adapter.root / ".memplane-tmp").iterdir()) == []

    def test_put_many_clears_a_record_left_at_its_path_and_keeps_an_existing_objects(
            self, adapter: LocalAdapter) -> None:
        adapter.put("a/1", b"first")
        assert adapter.set_storage_class("a/1", "archive") == "archive"
        left = adapter.root / ".memplane-class" / "m" / "1"  # a record outliving its object
        left.parent.mkdir(parents=True)
        left.write_text("cold")
        answers = adapter.put_many([("m/1", b"one"), ("a/1", b"again")])
        assert [type(a).__name__ if a is not None else None for a in answers] == [
            None, "ObjectExists"]
        assert not left.exists()
        assert (adapter.head("m/1").storage_class, adapter.head("a/1").storage_class) == (
            "standard", "archive")
        assert (adapter.get("m/1"), adapter.get("a/1")) == (b"one", b"first")

    def test_put_clears_a_record_left_at_its_path_and_keeps_an_existing_objects(
            self, adapter: LocalAdapter) -> None:
        adapter.put("a/1", b"first")
        adapter.put_file("a/2", io.BytesIO(b"second"))
        assert not (adapter.root / ".memplane-class").exists()  # no class recorded yet
        with pytest.raises(ObjectExists):
            adapter.put("a/1", b"again")
        assert adapter.set_storage_class("a/1", "archive") == "archive"
        left = adapter.root / ".memplane-class" / "m" / "1"  # a record outliving its object
        left.parent.mkdir(parents=True)
        left.write_text("cold")
        adapter.put("m/1", b"one")
        assert not left.exists()
        with pytest.raises(ObjectExists):
            adapter.put("a/1", b"again")
        with pytest.raises(ObjectExists):
            adapter.put_file("a/1", io.BytesIO(b"again"))
        assert (adapter.head("m/1").storage_class, adapter.head("a/1").storage_class) == (
            "standard", "archive")
        assert (adapter.get("m/1"), adapter.get("a/1"), adapter.get("a/2")) == (
            b"one", b"first", b"second")

    @pytest.mark.skipif(localfiles.syncfs is None, reason="syncfs(2) is Linux's")
    def test_put_many_flushes_the_file_system_once_before_it_answers(
            self, adapter: LocalAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
        flushed: list[str] = []
        fsynced: list[int] = []
        real = localfiles.syncfs

        def spy(fd: int) -> int:
            flushed.append(os.readlink(f"/proc/self/fd/{fd}"))
            return real(fd)  # type: ignore[no-any-return, misc]

        monkeypatch.setattr(localfiles, "syncfs", spy)
        monkeypatch.setattr(os, "fsync", fsynced.append)
        assert adapter.put_many([("m/1", b"one"), ("m/2", b"two"), ("n/3", b"three")]) == [
            None, None, None]
        assert (flushed, fsynced) == ([str(adapter.root)], [])

    def test_put_many_after_close_opens_its_descriptor_again(self, adapter: LocalAdapter
                                                             ) -> None:
        assert adapter.put_many([("m/1", b"one")]) == [None]
        adapter.close()
        assert adapter.put_many([("m/2", b"two")]) == [None]
        assert (adapter.get("m/1"), adapter.get("m/2")) == (b"one", b"two")

    def test_put_many_without_syncfs_fsyncs_every_object_and_directory(
            self, adapter: LocalAdapter, monkeypatch: pytest.MonkeyPatch) -> None:
        synced: list[str] = []
        real = os.fsync

        def spy(fd: int) -> None:
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
            real(fd)

        monkeypatch.setattr(localfiles, "syncfs", None)
        monkeypatch.setattr(os, "fsync", spy)
        assert adapter.put_many([("m/1", b"one"), ("m/2", b"two"), ("n/3", b"three")]) == [
            None, None, None]
        root = adapter.root
        assert sorted(synced) == sorted(str(p) for p in (
            root / "m/1", root / "m/2", root / "n/3", root / "m", root / "n"))

    @pytest.mark.parametrize("flush", ["syncfs", "fsync"])
    def test_put_many_whose_flush_fails_fails_every_object_it_covered(
            self, adapter: LocalAdapter, monkeypatch: pytest.MonkeyPatch, flush: str) -> None:
        def broken_syncfs(fd: int) -> int:
            ctypes.set_errno(errno.EIO)
            return -1

        def broken_fsync(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        adapter.put("a/1", b"first")
        monkeypatch.setattr(localfiles, "syncfs",
                            broken_syncfs if flush == "syncfs" else None)
        monkeypatch.setattr(os, "fsync", broken_fsync)
        answers = adapter.put_many([("m/1", b"one"), ("a/1", b"again")])
        assert [type(a).__name__ for a in answers] == ["StorageUnavailable", "ObjectExists"]
        assert str(answers[0]) == "local write failed: Input/output error"

    @pytest.mark.parametrize("unnamed", [True, False])
    def test_puts_name_no_temporary_file_where_the_file_system_allows(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unnamed: bool) -> None:
        """On Linux (ext4 here) an object is written to an unnamed file and linked into
        place: the temporary directory's entries never change, so its mtime stays. Without
        O_TMPFILE a named temporary is made and removed. Either way nothing is left."""
        if not unnamed:
            monkeypatch.setattr(localfiles, "UNNAMED_FLAGS", None)
        adapter = LocalAdapter(tmp_path / "bucket")
        temporaries = adapter.root / ".memplane-tmp"
        adapter.put("warm/1", b"the first put probes the file system")
        os.utime(temporaries, ns=(10**18, 10**18))
        adapter.put("a/1", b"one")
        assert adapter.put_many([("m/1", b"two"), ("a/1", b"again"), ("m/2", b"three")])[
            1].__class__.__name__ == "ObjectExists"
        with pytest.raises(ObjectExists):
            adapter.put("a/1", b"again")
        assert (temporaries.stat().st_mtime_ns == 10**18) is unnamed
        assert list(temporaries.iterdir()) == []
        assert (adapter.get("a/1"), adapter.get("m/1"), adapter.get("m/2")) == (
            b"one", b"two", b"three")
        assert oct((adapter.root / "a/1").stat().st_mode & 0o777) == "0o600"
        adapter.close()

    @pytest.mark.parametrize("unnamed", [True, False])
    def test_a_put_into_a_directory_removed_since_the_last_put_makes_it_again(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unnamed: bool) -> None:
        if not unnamed:
            monkeypatch.setattr(localfiles, "UNNAMED_FLAGS", None)
        adapter = LocalAdapter(tmp_path / "bucket")
        adapter.put("d/e/1", b"one")
        assert adapter.put_many([("d/e/2", b"two")]) == [None]
        shutil.rmtree(adapter.root / "d")
        adapter.put("d/e/3", b"three")
        assert adapter.get("d/e/3") == b"three"
        shutil.rmtree(adapter.root / "d")
        assert adapter.put_many([("d/e/4", b"four"), ("d/f/5", b"five")]) == [None, None]
        assert sorted(info.path for info in adapter.list("d/")) == ["d/e/4", "d/f/5"]
        assert (adapter.get("d/e/4"), adapter.get("d/f/5")) == (b"four", b"five")
        assert list((adapter.root / ".memplane-tmp").iterdir()) == []
        adapter.close()

    def test_a_put_makes_missing_directories_at_any_depth_and_refuses_a_file_in_the_way(
            self, adapter: LocalAdapter) -> None:
        (adapter.root / "s" / "made-elsewhere").mkdir(parents=True)  # another process's
        (adapter.root / "s" / "taken").write_bytes(b"a file, not a directory")
        answers = adapter.put_many([("s/made-elsewhere/1", b"one"), ("deep/a/b/c/2", b"two"),
                                    ("s/taken/3", b"three"), ("s/new/4", b"four")])
        assert [type(a).__name__ if a is not None else None for a in answers] == [
            None, None, "StorageUnavailable", None]
        assert str(answers[2]) == "local write failed: File exists"
        assert (adapter.get("s/made-elsewhere/1"), adapter.get("deep/a/b/c/2"),
                adapter.get("s/new/4")) == (b"one", b"two", b"four")
        assert (adapter.root / "s" / "taken").read_bytes() == b"a file, not a directory"
        with pytest.raises(StorageUnavailable):
            adapter.put("s/taken/x/5", b"five")  # a file where a parent directory should be
        assert list((adapter.root / ".memplane-tmp").iterdir()) == []


class TestMemoryContract(AdapterContract):
    backend = "memory"

    @pytest.fixture
    def adapter(self) -> Iterator[StorageAdapter]:
        adapter = MemoryAdapter()
        yield adapter
        adapter.close()

    def tamper(self, adapter: Any, path: str, data: bytes) -> None:
        adapter.replace(path, data)


class TestS3Contract(RemoteContract):
    """moto checks credentials only in IAM mode: a second moto runs that way for the
    bad-credential test."""

    backend = "s3"
    delete_kind = "delete_batch"
    delete_limit = 1000

    @pytest.fixture
    def adapter(self, s3_config: dict[str, Any], moto_server: MotoServer,
                ) -> Iterator[StorageAdapter]:
        from storage_adapters.s3 import S3Adapter

        self.bucket = s3_config["bucket"]
        self.raw = moto_server.client()
        adapter = S3Adapter.from_config(s3_config)
        yield adapter
        adapter.close()
        self.raw.close()

    def tamper(self, adapter: Any, path: str, data: bytes) -> None:
        self.raw.put_object(Bucket=self.bucket, Key=path, Body=data)

    @pytest.fixture
    def unreachable(self, s3_config: dict[str, Any]) -> StorageAdapter:
        from storage_adapters.s3 import S3Adapter

        return S3Adapter.from_config(
            {**s3_config, "endpoint_url": f"http://127.0.0.1:{closed_port()}"})

    @pytest.fixture
    def missing_bucket(self, s3_config: dict[str, Any]) -> tuple[StorageAdapter, str]:
        from storage_adapters.s3 import S3Adapter

        name = unique_name("missing")
        return S3Adapter.from_config({**s3_config, "bucket": name}), name

    def test_put_stores_sha256(self, adapter: StorageAdapter) -> None:
        adapter.put("sum/key", b"checked")
        head = self.raw.head_object(Bucket=self.bucket, Key="sum/key", ChecksumMode="ENABLED")
        expected = base64.b64encode(hashlib.sha256(b"checked").digest()).decode()
        assert head["ChecksumSHA256"] == expected

    def test_stored_checksum_mismatch_is_integrity_error(self, adapter: StorageAdapter) -> None:
        # moto keeps a client-sent checksum without verifying it: store a wrong one.
        wrong = base64.b64encode(hashlib.sha256(b"something else").digest()).decode()
        self.raw.put_object(Bucket=self.bucket, Key="bad/sum", Body=b"payload",
                            ChecksumAlgorithm="SHA256", ChecksumSHA256=wrong)
        with pytest.raises(IntegrityError):
            adapter.get("bad/sum")

    def test_bad_credentials(self, moto_auth_server: MotoServer) -> None:
        from storage_adapters.s3 import S3Adapter

        config = moto_auth_server.config("any-bucket") | {
            "access_key_id": "AKIANOTAREALKEY", "secret_access_key": "not-the-secret-42"}
        adapter = S3Adapter.from_config(config)
        for call in (lambda: adapter.get("x"), lambda: adapter.put("x", b"1"),
                     lambda: adapter.delete_many(["x"]), lambda: list(adapter.list(""))):
            assert_auth_error_hides(call, "not-the-secret-42")


class TestS3VersionedBucket:
    @pytest.fixture
    def adapter(self, versioned_s3_config: dict[str, Any]) -> Iterator[Any]:
        from storage_adapters.s3 import S3Adapter

        adapter = S3Adapter.from_config(versioned_s3_config)
        yield adapter
        adapter.close()

    def test_describe_reports_versioning(self, adapter: Any) -> None:
        assert adapter.describe().versioning is True

    def test_purge_leaves_no_version_and_no_delete_marker(
        self, adapter: Any, versioned_s3_config: dict[str, Any], moto_server: MotoServer,
    ) -> None:
        adapter.put("subject/k", b"first")
        adapter.delete_many(["subject/k"])
        adapter.put("subject/k", b"second")  # create-only passes: the latest is a marker
        adapter.put("subject/other", b"x")
        adapter.put("keep/me", b"y")
        versions = list(adapter.list_versions("subject/"))
        assert sorted((v.path, v.is_delete_marker) for v in versions) == [
            ("subject/k", False), ("subject/k", False), ("subject/k", True),
            ("subject/other", False)]
        assert adapter.purge_versions("subject/") == 4

        raw = moto_server.client()
        left = raw.list_object_versions(Bucket=versioned_s3_config["bucket"])
        raw.close()
        assert [v["Key"] for v in left.get("Versions", [])] == ["keep/me"]
        assert left.get("DeleteMarkers", []) == []

    def test_health_probe_leaves_nothing(
        self, adapter: Any, versioned_s3_config: dict[str, Any], moto_server: MotoServer,
    ) -> None:
        assert adapter.health_check().ok is True
        raw = moto_server.client()
        left = raw.list_object_versions(Bucket=versioned_s3_config["bucket"])
        raw.close()
        assert (left.get("Versions", []), left.get("DeleteMarkers", [])) == ([], [])


class TestGCSContract(RemoteContract):
    """fake-gcs-server accepts any credentials (anonymous here), so bad credentials are not
    testable; its batch endpoint does not work, so the parallel single-delete path runs;
    it keeps no noncurrent generations, so versioned purges are not testable either."""

    backend = "gcs"

    @pytest.fixture
    def adapter(self, gcs_config: dict[str, Any], gcs_server: FakeGcsServer,
                ) -> Iterator[StorageAdapter]:
        from storage_adapters.gcs import GCSAdapter

        self.raw = gcs_server.client().bucket(gcs_config["bucket"])
        adapter = GCSAdapter.from_config(gcs_config)
        yield adapter
        adapter.close()

    def tamper(self, adapter: Any, path: str, data: bytes) -> None:
        self.raw.blob(path).upload_from_string(data)

    @pytest.fixture
    def unreachable(self, gcs_config: dict[str, Any]) -> StorageAdapter:
        from storage_adapters.gcs import GCSAdapter

        return GCSAdapter.from_config(
            {**gcs_config, "endpoint": f"http://127.0.0.1:{closed_port()}"})

    @pytest.fixture
    def missing_bucket(self, gcs_config: dict[str, Any]) -> tuple[StorageAdapter, str]:
        from storage_adapters.gcs import GCSAdapter

        name = unique_name("missing")
        return GCSAdapter.from_config({**gcs_config, "bucket": name}), name

    def test_put_stores_crc32c(self, adapter: StorageAdapter) -> None:
        import google_crc32c

        adapter.put("sum/key", b"checked")
        expected = base64.b64encode(google_crc32c.Checksum(b"checked").digest()).decode()
        assert self.raw.get_blob("sum/key").crc32c == expected


class TestAzureContract(RemoteContract):
    """Azurite checks the account key, so bad credentials are tested here."""

    backend = "azure"
    delete_kind = "delete_batch"
    delete_limit = 256

    @pytest.fixture
    def adapter(self, azure_config: dict[str, Any], azurite_server: Azurite,
                ) -> Iterator[StorageAdapter]:
        from storage_adapters.azure import AzureAdapter

        self.server = azurite_server
        self.container = azure_config["container"]
        self.raw = azurite_server.client().get_container_client(self.container)
        adapter = AzureAdapter.from_config(azure_config)
        yield adapter
        adapter.close()
        self.raw.close()

    def tamper(self, adapter: Any, path: str, data: bytes) -> None:
        self.raw.upload_blob(path, data, overwrite=True)

    @pytest.fixture
    def unreachable(self, azure_config: dict[str, Any]) -> StorageAdapter:
        from storage_adapters.azure import AzureAdapter

        url = f"http://127.0.0.1:{closed_port()}/devstoreaccount1"
        return AzureAdapter(azure_config["container"], account_url=url,
                            sas_token="sv=2024-01-01&sr=c&sp=rwdl&sig=SECRETSIGNATURE")

    @pytest.fixture
    def missing_bucket(self, azure_config: dict[str, Any]) -> tuple[StorageAdapter, str]:
        from storage_adapters.azure import AzureAdapter

        name = unique_name("missing")
        return AzureAdapter.from_config({**azure_config, "container": name}), name

    def test_put_stores_md5(self, adapter: StorageAdapter) -> None:
        adapter.put("sum/key", b"checked")
        stored = self.raw.get_blob_client("sum/key").get_blob_properties()
        assert bytes(stored.content_settings.content_md5) == hashlib.md5(b"checked").digest()

    def test_stored_md5_mismatch_is_integrity_error(self, adapter: StorageAdapter) -> None:
        from azure.storage.blob import ContentSettings

        adapter.put("bad/sum", b"payload")
        self.raw.get_blob_client("bad/sum").set_http_headers(
            ContentSettings(content_md5=bytearray(hashlib.md5(b"other").digest())))
        with pytest.raises(IntegrityError):
            adapter.get("bad/sum")

    def test_bad_account_key(self, adapter: StorageAdapter) -> None:
        from storage_adapters.azure import AzureAdapter

        wrong_key = base64.b64encode(b"w" * 64).decode()
        adapter = AzureAdapter(self.container, account_url=self.server.account_url,
                               account_key=wrong_key)
        for call in (lambda: adapter.get("x"), lambda: adapter.put("x", b"1"),
                     lambda: adapter.delete_many(["x"]), lambda: list(adapter.list(""))):
            assert_auth_error_hides(call, wrong_key)

    def test_a_resend_counts_as_a_retry_not_as_another_request(
            self, unreachable: StorageAdapter) -> None:
        # Two attempts (the default), both refused: one put reached for the backend, and the
        # SDK sent it once more.
        with pytest.raises(StorageUnavailable):
            unreachable.put("x", b"1")
        assert dict(unreachable.stats.counts) == {"put": 1, "retry": 1}
        unreachable.stats.reset()
        with pytest.raises(StorageUnavailable):
            unreachable.delete_many(["x"])
        assert dict(unreachable.stats.counts) == {"delete_batch": 1, "retry": 1}

    def test_sas_token_never_in_errors(self, unreachable: StorageAdapter) -> None:
        with pytest.raises(StorageUnavailable) as info:
            unreachable.get("x")
        assert "SECRETSIGNATURE" not in str(info.value)
        assert info.value.__cause__ is None
