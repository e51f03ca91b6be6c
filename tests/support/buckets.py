"""A tenant bucket on each backend, seen from outside the service with the raw client.

Tests configure a tenant with ``connection_config`` through the SDK, then look at (or tamper
with) what the service wrote using the vendor client directly — never through the adapter
under test.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from .emulators import Azurite, FakeGcsServer, MotoServer, new_azure_container, unique_name

BACKEND_NAMES = ["local", "s3", "gcs", "azure"]


def _content(keys: Any) -> list[str]:
    """The service's objects, without the audit chain's checkpoints (``…/audit/…``), which
    the sealer writes into every tenant bucket on its own schedule."""
    return sorted(k for k in keys if "/audit/checkpoints/" not in f"/{k}")


class RawBucket:
    name: str
    connection_config: dict[str, Any]

    def keys(self, prefix: str = "") -> list[str]:
        """Every object key in the bucket under ``prefix``, sorted."""
        raise NotImplementedError

    def overwrite(self, key: str, data: bytes) -> None:
        """Replace the object's bytes behind the service's back."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class LocalBucket(RawBucket):
    name = "local"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.connection_config = {"root": str(root)}

    def keys(self, prefix: str = "") -> list[str]:
        # One walk: the server's background work (an audit checkpoint written, a directory
        # a delete emptied and pruned) may change the tree meanwhile; a directory gone
        # since its parent was read is skipped, as a bucket listing would, and a bucket not
        # made yet lists nothing.
        found = [Path(d, f).relative_to(self.root).as_posix()
                 for d, _, files in os.walk(self.root) for f in files]
        return _content(k for k in found if k.startswith(prefix) and ".memplane-tmp" not in k)

    def overwrite(self, key: str, data: bytes) -> None:
        (self.root / key).write_bytes(data)


class S3Bucket(RawBucket):
    name = "s3"

    def __init__(self, server: MotoServer, *, versioned: bool = False) -> None:
        self.bucket = unique_name("s3")
        server.create_bucket(self.bucket, versioned=versioned)
        self.connection_config = server.config(self.bucket)
        self.raw = server.client()

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.raw.get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                    Prefix=prefix)
        return _content(item["Key"] for page in pages for item in page.get("Contents", []))

    def versions(self, prefix: str = "") -> tuple[list[str], list[str]]:
        """(keys of every stored version, keys of every delete marker) under ``prefix``."""
        pages = self.raw.get_paginator("list_object_versions").paginate(Bucket=self.bucket,
                                                                         Prefix=prefix)
        versions: list[str] = []
        markers: list[str] = []
        for page in pages:
            versions += [v["Key"] for v in page.get("Versions", [])]
            markers += [m["Key"] for m in page.get("DeleteMarkers", [])]
        return _content(versions), _content(markers)

    def overwrite(self, key: str, data: bytes) -> None:
        self.raw.put_object(Bucket=self.bucket, Key=key, Body=data)

    def close(self) -> None:
        self.raw.close()


class GCSBucket(RawBucket):
    name = "gcs"

    def __init__(self, server: FakeGcsServer) -> None:
        self.bucket = unique_name("gcs")
        server.create_bucket(self.bucket)
        self.connection_config = server.config(self.bucket)
        self.raw = server.client()

    def keys(self, prefix: str = "") -> list[str]:
        return _content(b.name for b in self.raw.list_blobs(self.bucket, prefix=prefix or None))

    def overwrite(self, key: str, data: bytes) -> None:
        self.raw.bucket(self.bucket).blob(key).upload_from_string(data)

    def close(self) -> None:
        self.raw.close()


class AzureBucket(RawBucket):
    name = "azure"

    def __init__(self, server: Azurite) -> None:
        self.connection_config = new_azure_container(server)
        self.raw = server.client().get_container_client(self.connection_config["container"])

    def keys(self, prefix: str = "") -> list[str]:
        return _content(b.name for b in self.raw.list_blobs(name_starts_with=prefix or None))

    def overwrite(self, key: str, data: bytes) -> None:
        self.raw.upload_blob(key, data, overwrite=True)

    def close(self) -> None:
        self.raw.close()


def open_bucket(request: pytest.FixtureRequest, name: str, tmp_path: Path) -> RawBucket:
    """A fresh bucket on backend ``name``; emulators start only when a test needs them."""
    if name == "local":
        return LocalBucket(tmp_path / f"bucket-{unique_name('local')}")
    if name == "s3":
        return S3Bucket(request.getfixturevalue("moto_server"))
    if name == "s3-versioned":
        return S3Bucket(request.getfixturevalue("moto_server"), versioned=True)
    if name == "gcs":
        return GCSBucket(request.getfixturevalue("gcs_server"))
    if name == "azure":
        return AzureBucket(request.getfixturevalue("azurite_server"))
    raise ValueError(name)
