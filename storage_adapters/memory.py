"""An in-process bucket for unit tests of services. Not for production: nothing persists."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from .base import (
    BucketDescription,
    HealthReport,
    ObjectExists,
    ObjectInfo,
    ObjectNotFound,
    ObjectVersion,
    RequestStats,
    StorageClasses,
    check_path,
    check_prefix,
    timed_probe,
)
from .bounded import check_announced

_named: dict[str, dict[str, tuple[bytes, datetime]]] = {}
# Storage class of each object not in the default class, per named bucket.
_named_classes: dict[str, dict[str, str]] = {}
_named_lock = threading.Lock()


CLASSES = StorageClasses("standard", "archive", "cold", ("standard", "archive", "cold"))


class MemoryAdapter:
    scheme = "memory"

    def __init__(self, name: str | None = None, *, archive_class: str | None = None,
                 cold_class: str | None = None) -> None:
        """Objects live in a dict; adapters opened with the same ``name`` share it."""
        self.name = name or uuid.uuid4().hex
        self.storage_classes = CLASSES.with_overrides(archive_class, cold_class)
        with _named_lock:
            self._objects = _named.setdefault(self.name, {})
            self._classes = _named_classes.setdefault(self.name, {})
        self._lock = threading.Lock()
        self.stats = RequestStats()

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> MemoryAdapter:
        return cls(config.get("bucket") or None, archive_class=config.get("archive_class"),
                   cold_class=config.get("cold_class"))

    def put(self, path: str, data: bytes) -> None:
        check_path(path)
        self.stats.add("put")
        with self._lock:
            if path in self._objects:
                raise ObjectExists(path)
            self._objects[path] = (bytes(data), datetime.now(UTC))

    def get(self, path: str, max_bytes: int | None = None) -> bytes:
        check_path(path)
        self.stats.add("get")
        try:
            data = self._objects[path][0]
        except KeyError:
            raise ObjectNotFound(path) from None
        check_announced(len(data), max_bytes, path)
        return data

    def head(self, path: str) -> ObjectInfo:
        check_path(path)
        self.stats.add("head")
        try:
            data, when = self._objects[path]
        except KeyError:
            raise ObjectNotFound(path) from None
        return ObjectInfo(path, len(data), when,
                          self._classes.get(path, self.storage_classes.standard))

    def storage_class_name(self, storage_class: str) -> str:
        return self.storage_classes.native(storage_class)

    def set_storage_class(self, path: str, storage_class: str) -> str:
        check_path(path)
        native = self.storage_class_name(storage_class)
        self.stats.add("set_storage_class")
        with self._lock:
            if path not in self._objects:
                raise ObjectNotFound(path)
            if native == self.storage_classes.standard:
                self._classes.pop(path, None)
            else:
                self._classes[path] = native
        return native

    def delete_many(self, paths: Iterable[str]) -> int:
        n = 0
        with self._lock:
            for path in paths:
                check_path(path)
                self._objects.pop(path, None)
                self._classes.pop(path, None)
                n += 1
        self.stats.add("delete", n)
        return n

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        self.stats.add("list")
        with self._lock:
            items = sorted((p, v) for p, v in self._objects.items() if p.startswith(prefix))
        for path, (data, when) in items:
            yield ObjectInfo(path, len(data), when)

    def list_versions(self, prefix: str) -> Iterator[ObjectVersion]:
        for info in self.list(prefix):
            yield ObjectVersion(info.path, None, is_latest=True, size=info.size,
                                last_modified=info.last_modified)

    def purge_versions(self, prefix: str) -> int:
        return self.delete_many([info.path for info in self.list(prefix)])

    def describe(self) -> BucketDescription:
        return BucketDescription(backend="memory", bucket=self.name)

    def health_check(self) -> HealthReport:
        return timed_probe(self, f"health/{uuid.uuid4().hex}")

    def close(self) -> None:
        pass

    def replace(self, path: str, data: bytes) -> None:
        """Overwrite an object in place — for tests that tamper with stored content."""
        with self._lock:
            self._objects[path] = (bytes(data), datetime.now(UTC))
