"""Storage classes on every backend: local disk, memory, and the S3, GCS and Azure
emulators. What each emulator really keeps of a class is asserted in its own class with the
backend's raw client (see each docstring)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storage_adapters.base import InvalidStorageClass, StorageAdapter, StorageError
from storage_adapters.local import LocalAdapter
from storage_adapters.memory import MemoryAdapter

from .storage_classes import StorageClassContract


class TestLocalStorageClasses(StorageClassContract):
    """A directory has no classes: the adapter records the generic name beside the object."""

    standard, archive, cold, offline = "standard", "archive", "cold", "glacier"

    @pytest.fixture
    def adapter(self, tmp_path: Path) -> Iterator[StorageAdapter]:
        adapter = LocalAdapter(tmp_path / "bucket")
        yield adapter
        adapter.close()

    def stored_class(self, adapter: Any, path: str) -> str:
        record = adapter.root / ".memplane-class" / path
        return record.read_text() if record.exists() else "standard"

    def test_the_record_is_neither_content_nor_an_object_path(self, adapter: Any) -> None:
        adapter.put("m/x.json", b"{}")
        adapter.set_storage_class("m/x.json", "archive")
        assert (adapter.root / ".memplane-class" / "m" / "x.json").read_text() == "archive"
        assert (adapter.root / "m" / "x.json").read_bytes() == b"{}"
        assert list(adapter.list(".memplane-class/")) == []
        with pytest.raises(ValueError, match="invalid object path"):
            adapter.get(".memplane-class/m/x.json")
        adapter.delete_many(["m/x.json"])
        assert not (adapter.root / ".memplane-class" / "m" / "x.json").exists()

    def test_a_put_clears_a_record_left_behind(self, adapter: Any) -> None:
        stale = adapter.root / ".memplane-class" / "m" / "y.json"
        stale.parent.mkdir(parents=True)
        stale.write_text("cold")  # a crash between deleting an object and its record
        adapter.put("m/y.json", b"new")
        assert adapter.head("m/y.json").storage_class == "standard"
        assert not stale.exists()

    def test_classes_can_be_mapped_elsewhere(self, tmp_path: Path) -> None:
        adapter = LocalAdapter(tmp_path / "b2", archive_class="cold")
        adapter.put("k", b"v")
        assert adapter.set_storage_class("k", "archive") == "cold"
        with pytest.raises(InvalidStorageClass):
            LocalAdapter(tmp_path / "b3", archive_class="tape")


class TestMemoryStorageClasses(StorageClassContract):
    standard, archive, cold, offline = "standard", "archive", "cold", "glacier"

    @pytest.fixture
    def adapter(self) -> Iterator[StorageAdapter]:
        adapter = MemoryAdapter()
        yield adapter
        adapter.close()

    def stored_class(self, adapter: Any, path: str) -> str:
        return str(adapter.head(path).storage_class)


class TestS3StorageClasses(StorageClassContract):
    """moto keeps the class a copy onto itself sets (``head_object`` reports it) and
    recomputes the SHA-256 checksum of the copy."""

    standard, archive, cold, offline = "STANDARD", "STANDARD_IA", "GLACIER_IR", "GLACIER"

    @pytest.fixture
    def adapter(self, s3_config: dict[str, Any], moto_server: Any) -> Iterator[StorageAdapter]:
        from storage_adapters.s3 import S3Adapter

        self.bucket = s3_config["bucket"]
        self.raw = moto_server.client()
        adapter = S3Adapter.from_config(s3_config)
        yield adapter
        adapter.close()
        self.raw.close()

    def stored_class(self, adapter: Any, path: str) -> str:
        found = self.raw.head_object(Bucket=self.bucket, Key=path)
        return str(found.get("StorageClass", "STANDARD"))

    def test_the_copy_keeps_the_sha256_checksum(self, adapter: StorageAdapter) -> None:
        data = b"checked bytes" * 100
        adapter.put("sum/k", data)
        adapter.set_storage_class("sum/k", "cold")
        found = self.raw.head_object(Bucket=self.bucket, Key="sum/k", ChecksumMode="ENABLED")
        assert found["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(data).digest()).decode()
        assert (found["StorageClass"], found["ContentLength"]) == ("GLACIER_IR", len(data))
        assert adapter.get("sum/k") == data  # read with ChecksumMode=ENABLED

    def test_a_versioned_bucket_keeps_one_version(
            self, versioned_s3_config: dict[str, Any], moto_server: Any) -> None:
        from storage_adapters.s3 import S3Adapter

        adapter = S3Adapter.from_config(versioned_s3_config)
        raw = moto_server.client()
        try:
            adapter.put("v/k", b"one version")
            adapter.set_storage_class("v/k", "archive")
            listed = raw.list_object_versions(Bucket=versioned_s3_config["bucket"])
            assert [(v["Key"], v["StorageClass"], v["IsLatest"])
                    for v in listed.get("Versions", [])] == [("v/k", "STANDARD_IA", True)]
            assert listed.get("DeleteMarkers", []) == []
            assert adapter.get("v/k") == b"one version"
        finally:
            adapter.close()
            raw.close()

    def test_an_s3_config_maps_archive_to_glacier_ir(self, adapter: StorageAdapter,
                                                     s3_config: dict[str, Any]) -> None:
        from storage_adapters.s3 import S3Adapter

        mapped = S3Adapter.from_config({**s3_config, "archive_class": "glacier_ir"})
        try:
            mapped.put("m/k", b"x")
            assert mapped.set_storage_class("m/k", "archive") == "GLACIER_IR"
            assert self.stored_class(mapped, "m/k") == "GLACIER_IR"
        finally:
            mapped.close()


class TestGCSStorageClasses(StorageClassContract):
    """fake-gcs-server rewrites the object (a new generation, same bytes and CRC32C) but
    ignores the ``storageClass`` of the rewrite: the object stays STANDARD. The adapter reads
    the class from the rewrite's answer, so it refuses to claim a class the store did not
    set; that, the names and the untouched bytes are what is checked here. (Real GCS sets
    the class; the tests that need it kept are skipped on the emulator.)"""

    keeps_classes = False
    standard, archive, cold, offline = ("STANDARD", "NEARLINE", "COLDLINE",
                                        "DURABLE_REDUCED_AVAILABILITY")

    @pytest.fixture
    def adapter(self, gcs_config: dict[str, Any], gcs_server: Any) -> Iterator[StorageAdapter]:
        from storage_adapters.gcs import GCSAdapter

        self.raw = gcs_server.client().bucket(gcs_config["bucket"])
        adapter = GCSAdapter.from_config(gcs_config)
        yield adapter
        adapter.close()

    def stored_class(self, adapter: Any, path: str) -> str:
        return str(self.raw.get_blob(path).storage_class)

    def test_the_emulator_keeps_standard_and_the_adapter_says_so(
            self, adapter: StorageAdapter) -> None:
        data = b"rewritten, not changed" * 50
        adapter.put("g/k", data)
        before = self.raw.get_blob("g/k")
        with pytest.raises(StorageError) as info:
            adapter.set_storage_class("g/k", "archive")
        assert str(info.value).endswith(
            "/g/k: the store kept the object in STANDARD when asked for NEARLINE")
        after = self.raw.get_blob("g/k")
        assert after.generation != before.generation  # it was rewritten
        assert (after.storage_class, after.crc32c, after.size) == (
            "STANDARD", before.crc32c, len(data))
        assert adapter.get("g/k") == data
        assert adapter.head("g/k").storage_class == "STANDARD"
        assert [v.path for v in adapter.list_versions("g/")] == ["g/k"]

    def test_the_names(self, adapter: StorageAdapter) -> None:
        assert [adapter.storage_class_name(n) for n in ("standard", "archive", "cold",
                                                        "ARCHIVE", "coldline")] == [
            "STANDARD", "NEARLINE", "COLDLINE", "ARCHIVE", "COLDLINE"]


class TestAzureStorageClasses(StorageClassContract):
    """Azurite keeps the access tier ``set_standard_blob_tier`` sets, Cold included
    (``get_blob_properties().blob_tier``); the blob is not rewritten."""

    standard, archive, cold, offline = "Hot", "Cool", "Cold", "Archive"

    @pytest.fixture
    def adapter(self, azure_config: dict[str, Any], azurite_server: Any
                ) -> Iterator[StorageAdapter]:
        from storage_adapters.azure import AzureAdapter

        self.raw = azurite_server.client().get_container_client(azure_config["container"])
        adapter = AzureAdapter.from_config(azure_config)
        yield adapter
        adapter.close()
        self.raw.close()

    def stored_class(self, adapter: Any, path: str) -> str:
        return str(self.raw.get_blob_client(path).get_blob_properties().blob_tier)

    def test_the_tier_changes_in_place(self, adapter: StorageAdapter) -> None:
        adapter.put("t/k", b"in place")
        before = self.raw.get_blob_client("t/k").get_blob_properties()
        adapter.set_storage_class("t/k", "cold")
        after = self.raw.get_blob_client("t/k").get_blob_properties()
        assert (after.blob_tier, after.etag, after.content_settings.content_md5) == (
            "Cold", before.etag, before.content_settings.content_md5)
        assert adapter.get("t/k") == b"in place"
