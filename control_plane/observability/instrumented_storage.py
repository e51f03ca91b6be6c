"""Storage adapters whose calls are timed and whose failures are counted per backend."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Iterator
from typing import Any

from .metrics import Metrics


def _storage_problem(exc: BaseException) -> str:
    from storage_adapters import base as storage

    if isinstance(exc, storage.ObjectNotFound):
        return "not_found"
    if isinstance(exc, storage.ObjectExists):
        return "exists"
    if isinstance(exc, storage.IntegrityError):
        return "integrity"
    if isinstance(exc, storage.StorageError):
        return storage.problem_code(exc)
    return "other"


class InstrumentedAdapter:
    """A storage adapter whose calls are timed and whose failures are counted per backend.

    The label children are looked up once, here, so a call costs two ``perf_counter`` reads
    and one histogram observation. The streaming calls (``put_file``, ``iter_chunks``) and
    ``put_many`` are timed too and exist only when the wrapped adapter has them; anything
    else is the wrapped adapter's own.
    """

    _TIMED = ("put", "get", "head", "delete_many", "purge_versions", "describe",
              "health_check")

    def __init__(self, inner: Any, backend: str, metrics: Metrics) -> None:
        self.inner = inner
        self.backend = backend
        self._metrics = metrics
        self._observe = {op: metrics.storage_latency.labels(backend, op).observe
                         for op in (*self._TIMED, "list", "list_versions", "put_file",
                                    "iter_chunks", "put_many")}

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        found = getattr(self.inner, name)
        if name == "put_file":
            return functools.partial(self._call, name)
        if name == "iter_chunks":
            return functools.partial(self._listing, name)
        if name == "put_many":
            return self._put_many
        return found

    def _put_many(self, items: Any) -> list[Any]:
        answers: list[Any] = self._call("put_many", items)
        for answer in answers:  # each object that failed counts as a failure
            if answer is not None:
                self._failed("put_many", answer)
        return answers

    def _failed(self, operation: str, exc: BaseException) -> None:
        self._metrics.storage_errors.labels(self.backend, operation,
                                            _storage_problem(exc)).inc()

    def _call(self, operation: str, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return getattr(self.inner, operation)(*args)
        except BaseException as exc:
            self._failed(operation, exc)
            raise
        finally:
            self._observe[operation](time.perf_counter() - started)

    def _listing(self, operation: str, *args: Any) -> Iterator[Any]:
        started = time.perf_counter()
        try:
            yield from getattr(self.inner, operation)(*args)
        except GeneratorExit:
            raise
        except BaseException as exc:
            self._failed(operation, exc)
            raise
        finally:
            self._observe[operation](time.perf_counter() - started)

    def put(self, path: str, data: bytes) -> None:
        self._call("put", path, data)

    def get(self, path: str, max_bytes: int | None = None) -> bytes:
        return self._call("get", path, max_bytes)  # type: ignore[no-any-return]

    def head(self, path: str) -> Any:
        return self._call("head", path)

    def delete_many(self, paths: Iterable[str]) -> int:
        return self._call("delete_many", paths)  # type: ignore[no-any-return]

    def purge_versions(self, prefix: str) -> int:
        return self._call("purge_versions", prefix)  # type: ignore[no-any-return]

    def describe(self) -> Any:
        return self._call("describe")

    def health_check(self) -> Any:
        return self._call("health_check")

    def list(self, prefix: str) -> Iterator[Any]:
        return self._listing("list", prefix)

    def list_versions(self, prefix: str) -> Iterator[Any]:
        return self._listing("list_versions", prefix)

    def close(self) -> None:
        self.inner.close()


def backend_name(adapter: Any) -> str:
    """``s3``, ``gcs``, ``azure``, ``local`` or ``memory`` from the adapter's class."""
    return type(adapter).__name__.removesuffix("Adapter").lower()
