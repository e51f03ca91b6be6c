"""Every storage call ends by its deadline, and no answer of a bucket grows past a ceiling:
both enforced at the connection, so they hold for every request a client library makes.

A tenant's bucket is a hostile party (DESIGN §12). A bucket that sends a byte every few
seconds never trips a per-read timeout, and a client library reads a listing, a metadata
document or an error body whole, however large. So the network adapters (S3, GCS, Azure)
make their connections through the classes here (netguard's guarded ones carry them too;
the operator's default bucket, which is not guarded, gets them all the same):

- **Deadlines.** Each storage call runs in a :func:`within` scope (the adapter classes are
  decorated with :func:`bounded_calls`): an absolute deadline, kept in a context variable,
  that starts before the call's first attempt. Every ``recv``/``send`` of a connection used
  in the scope waits at most ``min(its own timeout, what is left of the deadline)``; once
  the deadline has passed, a read or write fails at once (:class:`DeadlinePassed`, a
  ``TimeoutError``), so does a new connection, and the client libraries stop retrying
  (:func:`stop_retrying`): their retries count against the same deadline. The library
  closes the connection it timed out on, and the scope turns the failure into
  :class:`DeadlineExceeded` (503 ``storage_unavailable``). Nested scopes keep the earliest
  deadline: a health check is one call, however many requests it makes. Listings and
  streamed reads are generators: each step (a page, a chunk) gets a deadline of its own.
  Bulk deletes get one per batch request, so a call of N batches (N the caller's, never
  the bucket's) is bounded by N deadlines.
- **Ceiling.** A connection counts the bytes it receives after it last sent; past
  :data:`RESPONSE_CEILING_BYTES` a read fails with :class:`ResponseTooLarge` (a
  StorageUnavailable, not an ``OSError``: no library retries it) and the library drops the
  connection. Only the bounded object-body readers (storage_adapters/bounded.py, with a
  ``max_bytes`` of their own) read past it, inside :func:`object_body`.
"""

from __future__ import annotations

import functools
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from .base import BucketNotFound, EndpointRefused, StorageError, StorageUnavailable

RESPONSE_CEILING_BYTES = 16 << 20
"""The most bytes one answer of a bucket may have, other than an object's bounded body."""

C = TypeVar("C", bound=type)


class DeadlineExceeded(StorageUnavailable):
    """A storage call ran past its overall deadline; its connection was closed."""


class ResponseTooLarge(StorageUnavailable):
    """A bucket's answer was larger than :data:`RESPONSE_CEILING_BYTES`; it was not read."""


class DeadlinePassed(TimeoutError):
    """A socket operation of a storage call whose deadline has passed (libraries treat it
    as a timeout, and close the connection)."""


class _Scope:
    __slots__ = ("ends", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.ends = time.monotonic() + self.seconds


_SCOPES: ContextVar[tuple[_Scope, ...]] = ContextVar("storage_call_scopes", default=())
_OBJECT_BODY: ContextVar[bool] = ContextVar("storage_object_body", default=False)


def remaining() -> float | None:
    """Seconds left of the current storage call's deadline (None outside a call)."""
    scopes = _SCOPES.get()
    if not scopes:
        return None
    return min(scope.ends for scope in scopes) - time.monotonic()


def _passed() -> _Scope | None:
    now = time.monotonic()
    return next((scope for scope in _SCOPES.get() if scope.ends <= now), None)


@contextmanager
def object_body() -> Iterator[None]:
    """Reads of an object's body, which the caller bounds itself (``max_bytes``)."""
    token = _OBJECT_BODY.set(True)
    try:
        yield
    finally:
        _OBJECT_BODY.reset(token)


def _late(exc: BaseException) -> bool:
    """Whether ``exc`` is what a call that ran out of time fails with."""
    if isinstance(exc, DeadlineExceeded | ResponseTooLarge | EndpointRefused | BucketNotFound):
        return False
    return isinstance(exc, StorageUnavailable | OSError) or type(exc) is StorageError


@contextmanager
def within(seconds: float, where: Callable[[], str]) -> Iterator[None]:
    """One storage call: its connections' reads and writes end by ``seconds`` from now (or
    an enclosing call's deadline, if earlier). A failure once the deadline has passed is
    DeadlineExceeded; a ResponseTooLarge is told where it came from."""
    token = _SCOPES.set((*_SCOPES.get(), _Scope(seconds)))
    try:
        yield
    except ResponseTooLarge as exc:
        if getattr(exc, "located", False):
            raise
        located = ResponseTooLarge(f"{where()}: {exc}")
        located.located = True  # type: ignore[attr-defined]
        raise located from None
    except BaseException as exc:
        late = _passed()
        if late is not None and _late(exc):
            raise DeadlineExceeded(f"{where()}: the storage call took longer than its "
                                   f"{late.seconds:g} s deadline") from None
        raise
    finally:
        _SCOPES.reset(token)


def stop_retrying(*_: Any, caught_exception: BaseException | None = None, **__: Any) -> None:
    """Called by a client library before it tries again (botocore's ``needs-retry`` event,
    google's ``on_error``, Azure's retry sleep): past the call's deadline it does not, and
    does not sleep first either; nor after an answer over the ceiling (which botocore wraps
    as a retryable client error), which is raised as itself."""
    refused = _too_large_in(caught_exception)
    if refused is not None:
        raise refused
    left = remaining()
    if left is not None and left <= 0:
        raise DeadlinePassed("the storage call's deadline has passed; no more attempts")


def _too_large_in(exc: BaseException | None, depth: int = 0) -> ResponseTooLarge | None:
    if exc is None or depth > 6:
        return None
    if isinstance(exc, ResponseTooLarge):
        return exc
    kwargs = getattr(exc, "kwargs", None)
    inner = kwargs.get("error") if isinstance(kwargs, dict) else None
    for candidate in (exc.__cause__, exc.__context__, inner):
        if isinstance(candidate, BaseException) and candidate is not exc:
            found = _too_large_in(candidate, depth + 1)
            if found is not None:
                return found
    return None


# -- the adapters' calls ---------------------------------------------------------------

CALLS = ("put", "put_file", "get", "head", "set_storage_class", "describe", "health_check")
"""Protocol methods that are one call, one deadline."""
STEPS = ("list", "list_versions", "iter_chunks")
"""Generators: each step (a page, a chunk) one deadline."""


def bounded_calls(*units: str) -> Callable[[C], C]:
    """Run an adapter's calls within its ``call_deadline`` (:data:`CALLS`, :data:`STEPS`
    and the adapter's own ``units``: each batch request of a bulk delete, say)."""
    def decorate(cls: C) -> C:
        for name in (*CALLS, *units):
            setattr(cls, name, _call(getattr(cls, name)))
        for name in STEPS:
            setattr(cls, name, _steps(getattr(cls, name)))
        return cls
    return decorate


def _where(adapter: Any, args: tuple[Any, ...]) -> Callable[[], str]:
    def where() -> str:
        bucket = getattr(adapter, "bucket", None) or getattr(adapter, "container", "")
        path = args[0] if args and isinstance(args[0], str) else ""
        return f"{adapter.scheme}://{bucket}/{getattr(adapter, 'root', '')}{path}"
    return where


def _call(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with within(self.call_deadline, _where(self, args)):
            return method(self, *args, **kwargs)
    return call


def _steps(method: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    @functools.wraps(method)
    def steps(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        inner = method(self, *args, **kwargs)
        try:
            while True:
                with within(self.call_deadline, _where(self, args)):
                    try:
                        item = next(inner)
                    except StopIteration:
                        return
                yield item
        finally:
            getattr(inner, "close", lambda: None)()
    return steps


# -- the connections -------------------------------------------------------------------

class _Watched:
    """A socket whose reads and writes keep to the current call's deadline and whose
    answers keep under the ceiling."""

    _received: int  # bytes received since the last send

    def _timed(self, op: Callable[..., Any], *args: Any) -> Any:
        left = remaining()
        if left is None:
            return op(*args)
        if left <= 0:
            raise DeadlinePassed("the storage call's deadline has passed")
        sock: Any = self
        base = sock.gettimeout()
        sock.settimeout(left if base is None else min(base, left))
        try:
            return op(*args)
        except TimeoutError:
            if (remaining() or 0) <= 0:
                raise DeadlinePassed("the storage call's deadline has passed") from None
            raise
        finally:
            try:
                sock.settimeout(base)
            except OSError:
                pass  # closed meanwhile

    def _count(self, n: int) -> None:
        self._received = received = getattr(self, "_received", 0) + n
        if received > RESPONSE_CEILING_BYTES and not _OBJECT_BODY.get():
            raise ResponseTooLarge(
                f"the bucket's answer was larger than {RESPONSE_CEILING_BYTES >> 20} MiB; "
                "it was not read (this server refuses answers that large)")

    def recv(self, *args: Any) -> bytes:
        data: bytes = self._timed(super().recv, *args)  # type: ignore[misc]
        self._count(len(data))
        return data

    def recv_into(self, *args: Any) -> int:
        n: int = self._timed(super().recv_into, *args)  # type: ignore[misc]
        self._count(n)
        return n

    def send(self, *args: Any) -> int:
        self._received = 0  # a new request, a new answer
        sent: int = self._timed(super().send, *args)  # type: ignore[misc]
        return sent

    def sendall(self, *args: Any) -> None:
        self._received = 0
        self._timed(super().sendall, *args)  # type: ignore[misc]


class _Socket(_Watched, socket.socket):
    pass


class _SSLSocket(_Watched, ssl.SSLSocket):
    pass


def watch(sock: Any) -> Any:
    """``sock`` (a plain or TLS socket) as a watched one: the same connection."""
    if sock is None or isinstance(sock, _Watched):
        return sock
    if isinstance(sock, ssl.SSLSocket):
        sock.__class__ = _SSLSocket
        return sock
    if type(sock) is socket.socket:
        timeout = sock.gettimeout()
        watched = _Socket(sock.family, sock.type, sock.proto, fileno=sock.detach())
        watched.settimeout(timeout)
        return watched
    return sock  # some other transport: left as it is


def _connection(base: type[Any]) -> type[Any]:
    class DeadlineConnection(base):  # type: ignore[misc, valid-type]
        timeout: Any
        sock: Any

        def _new_conn(self) -> Any:
            left = remaining()
            if left is not None:
                if left <= 0:
                    from urllib3.exceptions import ConnectTimeoutError

                    raise ConnectTimeoutError(self, "the storage call's deadline has passed")
                if not isinstance(self.timeout, int | float) or self.timeout > left:
                    self.timeout = left
            return watch(super()._new_conn())

        def connect(self) -> None:
            super().connect()
            self.sock = watch(self.sock)

    return DeadlineConnection


def armed_pool(pool: type[Any]) -> type[Any]:
    """A subclass of this urllib3 connection pool whose connections are watched."""
    if getattr(pool, "_watched", False):
        return pool
    return type(f"Watched{pool.__name__}", (pool,),
                {"ConnectionCls": _connection(pool.ConnectionCls), "_watched": True})


def armed_pools(http_pool: type[Any], https_pool: type[Any]) -> dict[str, type[Any]]:
    return {"http": armed_pool(http_pool), "https": armed_pool(https_pool)}


def requests_adapter(**kwargs: Any) -> Any:
    """A ``requests`` HTTPAdapter whose connections (through a proxy too) are watched."""
    import requests.adapters
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    pools = armed_pools(HTTPConnectionPool, HTTPSConnectionPool)

    class WatchedAdapter(requests.adapters.HTTPAdapter):
        def init_poolmanager(self, *args: Any, **options: Any) -> None:
            super().init_poolmanager(*args, **options)
            self.poolmanager.pool_classes_by_scheme = pools

        def proxy_manager_for(self, proxy: str, **options: Any) -> Any:
            manager = super().proxy_manager_for(proxy, **options)
            manager.pool_classes_by_scheme = pools
            return manager

    return WatchedAdapter(**kwargs)


def requests_session(**adapter_options: Any) -> Any:
    """A ``requests.Session`` whose connections are watched."""
    import requests

    session = requests.Session()
    adapter = requests_adapter(**adapter_options)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
