"""Storage classes on every backend: local disk and memory here; what each emulator really
keeps of a class is asserted in its own class (see each docstring)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storage_adapters.base import InvalidStorageClass, StorageAdapter
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

    def stored_class(self, adapter: Any, path: str) -> str | None:
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

    def stored_class(self, adapter: Any, path: str) -> str | None:
        return str(adapter.head(path).storage_class)
