"""Compliance endpoints: a data subject's export and erasure, jobs, receipts.

The request builders here are shared by the sync and async clients like those in
``_base.py``; the namespaces are reached as ``client.jobs``, ``client.exports`` and
``client.receipts`` (export and erasure start from ``client.memory``).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import BaseModel, ConfigDict

from . import _base
from ._base import Call, parse_model, path_segment
from ._exceptions import TransportError, error_from_response
from ._receipts import verify_receipt

if TYPE_CHECKING:
    from ._async_client import AsyncClient
    from ._client import Client

__all__ = ["AsyncExportsAPI", "AsyncJobsAPI", "AsyncReceiptsAPI", "ExportsAPI", "Job",
           "JobsAPI", "Receipt", "ReceiptsAPI"]

FINISHED = frozenset({"completed", "failed"})


class Job(BaseModel):
    """A background job (export, erase). ``result`` is set once ``state`` is completed or
    failed; an erasure's result carries ``receipt_id``."""

    model_config = ConfigDict(extra="allow")

    id: str
    kind: str
    state: str
    progress: dict[str, Any] = {}
    result: dict[str, Any] | None = None
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


class Receipt(BaseModel):
    """A signed erasure receipt exactly as the server sent it (every field kept)."""

    model_config = ConfigDict(extra="allow")

    id: str
    key_id: str
    signature: str

    def as_dict(self) -> dict[str, Any]:
        """The receipt as plain JSON data, ready to save or verify."""
        return self.model_dump(mode="json")


# -- request builders -----------------------------------------------------------------------


def export_subject(user_id: str, fmt: str) -> Call[Job]:
    return Call("POST", f"/v1/subjects/{path_segment(user_id, name='user_id')}/export",
                parse_model(Job), json={"format": fmt})


def erase_subject(user_id: str, dry_run: bool) -> Call[Job]:
    return Call("POST", f"/v1/subjects/{path_segment(user_id, name='user_id')}/erase",
                parse_model(Job), json={"dry_run": dry_run})


def job_get(job_id: str) -> Call[Job]:
    return Call("GET", f"/v1/jobs/{path_segment(str(job_id), name='job_id')}", parse_model(Job))


def receipt_get(receipt_id: str) -> Call[Receipt]:
    return Call("GET", f"/v1/receipts/{path_segment(str(receipt_id), name='receipt_id')}",
                parse_model(Receipt))


def _text(response: httpx.Response) -> str:
    return response.text


def receipt_public_key() -> Call[str]:
    return Call("GET", "/v1/receipts/public-key", _text)


def download_call(job_id: str) -> Call[None]:
    return Call("GET", f"/v1/exports/{path_segment(str(job_id), name='job_id')}/download",
                _base.parse_nothing)


def _as_mapping(receipt: Receipt | Mapping[str, Any]) -> Mapping[str, Any]:
    return receipt.as_dict() if isinstance(receipt, Receipt) else receipt


def _next_delay(delay: float) -> float:
    return min(delay * 1.5, 2.0)


# -- sync -------------------------------------------------------------------------------------


class JobsAPI:
    """Background jobs; reached as ``client.jobs``."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def get(self, job_id: str) -> Job:
        """The job's current state, progress and result."""
        return self._client._send(job_get(job_id))

    def wait(self, job_id: str, *, timeout: float = 600.0,
             on_progress: Callable[[Job], None] | None = None) -> Job:
        """Poll until the job is completed or failed and return it (check ``state``).

        ``on_progress`` is called with each polled state. Raises ``TimeoutError`` if the job
        is still running after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        delay = 0.1
        while True:
            job = self.get(job_id)
            if on_progress is not None:
                on_progress(job)
            if job.finished:
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} is still {job.state} after {timeout} s")
            time.sleep(delay)
            delay = _next_delay(delay)


class ExportsAPI:
    """Finished exports; reached as ``client.exports``."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def download(self, job_id: str, path: str | os.PathLike[str]) -> int:
        """Stream the export's ZIP into ``path`` (written whole or not at all); returns the
        number of bytes.

        The server decrypts the archive and checks its SHA-256 before sending a byte: a
        damaged or replaced archive raises ``HashMismatch`` (409). After the archive's expiry
        (``MEMPLANE_EXPORT_TTL_HOURS`` on the server) it raises ``APIError`` with
        ``status_code`` 410 and code ``export_expired``: start a new export.
        """
        call = download_call(job_id)
        http = self._client._http
        request = self._client._config.build_request(http, call)
        target = Path(path)
        partial = target.with_name(target.name + ".part")
        size = 0
        try:
            response = http.send(request, stream=True)
        except httpx.RequestError as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        try:
            if response.is_error:
                response.read()
                raise error_from_response(response)
            with open(partial, "wb") as out:
                for chunk in response.iter_bytes(1 << 20):
                    out.write(chunk)
                    size += len(chunk)
        except httpx.RequestError as exc:
            partial.unlink(missing_ok=True)
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            response.close()
        os.replace(partial, target)
        return size


class ReceiptsAPI:
    """Signed erasure receipts; reached as ``client.receipts``."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def get(self, receipt_id: str) -> Receipt:
        return self._client._send(receipt_get(receipt_id))

    def public_key(self) -> str:
        """The server's receipt signing key, PEM."""
        return self._client._send(receipt_public_key())

    @staticmethod
    def verify(receipt: Receipt | Mapping[str, Any], public_key_pem: str | bytes) -> bool:
        """Offline: True when the receipt is unchanged and signed by this key."""
        return verify_receipt(_as_mapping(receipt), public_key_pem)


# -- async ------------------------------------------------------------------------------------


class AsyncJobsAPI:
    """Background jobs; reached as ``client.jobs``."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def get(self, job_id: str) -> Job:
        return await self._client._send(job_get(job_id))

    async def wait(self, job_id: str, *, timeout: float = 600.0,
                   on_progress: Callable[[Job], None] | None = None) -> Job:
        """Poll until the job is completed or failed; ``TimeoutError`` after ``timeout``."""
        deadline = time.monotonic() + timeout
        delay = 0.1
        while True:
            job = await self.get(job_id)
            if on_progress is not None:
                on_progress(job)
            if job.finished:
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} is still {job.state} after {timeout} s")
            await asyncio.sleep(delay)
            delay = _next_delay(delay)


class AsyncExportsAPI:
    """Finished exports; reached as ``client.exports``."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def download(self, job_id: str, path: str | os.PathLike[str]) -> int:
        """Stream the export's ZIP into ``path``; returns the number of bytes. Errors as in
        the sync client: 409 ``HashMismatch``, 410 ``APIError`` once the archive expired."""
        call = download_call(job_id)
        http = self._client._http
        request = self._client._config.build_request(http, call)
        target = Path(path)
        partial = target.with_name(target.name + ".part")
        size = 0
        try:
            response = await http.send(request, stream=True)
        except httpx.RequestError as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        try:
            if response.is_error:
                await response.aread()
                raise error_from_response(response)
            with open(partial, "wb") as out:
                async for chunk in response.aiter_bytes(1 << 20):
                    out.write(chunk)
                    size += len(chunk)
        except httpx.RequestError as exc:
            partial.unlink(missing_ok=True)
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            await response.aclose()
        os.replace(partial, target)
        return size


class AsyncReceiptsAPI:
    """Signed erasure receipts; reached as ``client.receipts``."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def get(self, receipt_id: str) -> Receipt:
        return await self._client._send(receipt_get(receipt_id))

    async def public_key(self) -> str:
        return await self._client._send(receipt_public_key())

    @staticmethod
    def verify(receipt: Receipt | Mapping[str, Any], public_key_pem: str | bytes) -> bool:
        """Offline: True when the receipt is unchanged and signed by this key."""
        return verify_receipt(_as_mapping(receipt), public_key_pem)
