"""The storage-class contract: one suite every backend's test class subclasses.

A subclass supplies the ``adapter`` fixture, the backend's names of the three generic
classes, and ``stored_class`` — what the backend itself (not the adapter) says the object's
class is, or None where the backend (an emulator) does not keep it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from storage_adapters.base import InvalidStorageClass, ObjectNotFound, StorageAdapter


class StorageClassContract:
    # False where the backend (an emulator) accepts the request but keeps the old class: the
    # tests that need the class kept are skipped and the subclass checks what happens instead.
    keeps_classes: ClassVar[bool] = True
    standard: ClassVar[str]
    archive: ClassVar[str]
    cold: ClassVar[str]
    # A name the backend has but the adapter refuses: its objects do not read back at once.
    offline: ClassVar[str]

    @pytest.fixture
    def adapter(self) -> Iterator[StorageAdapter]:
        raise NotImplementedError

    def stored_class(self, adapter: Any, path: str) -> str:
        """The class as the backend reports it, asked with its own client."""
        raise NotImplementedError

    def needs_kept_classes(self) -> None:
        if not self.keeps_classes:
            pytest.skip(f"{type(self).__name__}: the emulator does not keep storage classes")

    def test_a_new_object_is_in_the_standard_class(self, adapter: StorageAdapter) -> None:
        adapter.put("cls/new.bin", b"fresh")
        assert adapter.head("cls/new.bin").storage_class == self.standard

    def test_archive_keeps_the_bytes_and_reads_back(self, adapter: StorageAdapter) -> None:
        self.needs_kept_classes()
        data = os.urandom(70_001)
        adapter.put("cls/a/obj.bin", data)
        assert adapter.set_storage_class("cls/a/obj.bin", "archive") == self.archive
        info = adapter.head("cls/a/obj.bin")
        assert (info.storage_class, info.size) == (self.archive, len(data))
        assert adapter.get("cls/a/obj.bin") == data
        assert self.stored_class(adapter, "cls/a/obj.bin") == self.archive

    def test_generic_and_native_names(self, adapter: StorageAdapter) -> None:
        self.needs_kept_classes()
        adapter.put("cls/names.bin", b"x" * 10)
        assert adapter.storage_class_name("archive") == self.archive
        assert adapter.storage_class_name("cold") == self.cold
        assert adapter.storage_class_name(self.archive.lower()) == self.archive
        assert adapter.set_storage_class("cls/names.bin", "cold") == self.cold
        assert adapter.head("cls/names.bin").storage_class == self.cold
        assert adapter.set_storage_class("cls/names.bin", self.standard) == self.standard
        assert adapter.head("cls/names.bin").storage_class == self.standard
        assert adapter.get("cls/names.bin") == b"x" * 10

    def test_setting_the_same_class_again_changes_nothing(self, adapter: StorageAdapter
                                                          ) -> None:
        self.needs_kept_classes()
        adapter.put("cls/twice.bin", b"twice")
        adapter.set_storage_class("cls/twice.bin", "archive")
        assert adapter.set_storage_class("cls/twice.bin", "archive") == self.archive
        assert [(i.path, i.size) for i in adapter.list("cls/twice")] == [("cls/twice.bin", 5)]
        assert adapter.get("cls/twice.bin") == b"twice"

    def test_unknown_and_offline_classes_are_refused(self, adapter: StorageAdapter) -> None:
        adapter.put("cls/refused.bin", b"stay")
        for name in ("frozen", self.offline):
            with pytest.raises(InvalidStorageClass) as info:
                adapter.set_storage_class("cls/refused.bin", name)
            assert str(info.value).startswith(f"unknown storage class {name!r}; use one of "
                                              "standard, archive, cold, ")
            assert isinstance(info.value, ValueError)
        assert adapter.head("cls/refused.bin").storage_class == self.standard

    def test_a_missing_object(self, adapter: StorageAdapter) -> None:
        with pytest.raises(ObjectNotFound):
            adapter.set_storage_class("cls/missing.bin", "archive")

    def test_a_deleted_object_takes_its_class_with_it(self, adapter: StorageAdapter) -> None:
        self.needs_kept_classes()
        adapter.put("cls/gone.bin", b"one")
        adapter.set_storage_class("cls/gone.bin", "archive")
        adapter.delete_many(["cls/gone.bin"])
        assert list(adapter.list("cls/gone")) == []
        adapter.put("cls/gone.bin", b"two")
        assert adapter.head("cls/gone.bin").storage_class == self.standard

    def test_listings_show_only_the_objects(self, adapter: StorageAdapter) -> None:
        self.needs_kept_classes()
        adapter.put("cls/l/one.bin", b"1")
        adapter.put("cls/l/two.bin", b"22")
        adapter.set_storage_class("cls/l/one.bin", "cold")
        assert [(i.path, i.size) for i in adapter.list("cls/l/")] == [
            ("cls/l/one.bin", 1), ("cls/l/two.bin", 2)]
        assert sorted(i.path for i in adapter.list("")) == ["cls/l/one.bin", "cls/l/two.bin"]
        assert sorted(v.path for v in adapter.list_versions("cls/")) == [
            "cls/l/one.bin", "cls/l/two.bin"]
