"""The compliance namespaces of ``AsyncClient``: ``client.jobs``, ``client.exports`` and
``client.receipts`` (export and erasure start from ``client.memory``).

``_compliance_sync.py`` is generated from this file by ``scripts/unasync.py``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from ._compliance import (
    Job,
    Receipt,
    download_call,
    job_get,
    next_delay,
    receipt_get,
    receipt_public_key,
)
from ._exceptions import TransportError, error_from_response
from ._namespace_async import _Namespace
from ._receipts import verify_receipt

__all__ = ["AsyncExportsAPI", "AsyncJobsAPI", "AsyncReceiptsAPI"]


class AsyncJobsAPI(_Namespace):
    """Background jobs; reached as ``client.jobs``."""

    async def get(self, job_id: str) -> Job:
        """The job's current state, progress and result."""
        return await self._client._send(job_get(job_id))

    async def wait(self, job_id: str, *, timeout: float = 600.0,
                   on_progress: Callable[[Job], None] | None = None) -> Job:
        """Poll until the job is completed or failed and return it (check ``state``).

        ``on_progress`` is called with each polled state. Raises ``TimeoutError`` if the job
        is still running after ``timeout`` seconds.
        """
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
            delay = next_delay(delay)


class AsyncExportsAPI(_Namespace):
    """Finished exports; reached as ``client.exports``."""

    async def download(self, job_id: str, path: str | os.PathLike[str]) -> int:
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


class AsyncReceiptsAPI(_Namespace):
    """Signed erasure receipts; reached as ``client.receipts``."""

    async def get(self, receipt_id: str) -> Receipt:
        return await self._client._send(receipt_get(receipt_id))

    async def public_key(self) -> str:
        """The server's receipt signing key, PEM."""
        return await self._client._send(receipt_public_key())

    @staticmethod
    def verify(receipt: Receipt | Mapping[str, Any], public_key_pem: str | bytes) -> bool:
        """Offline: True when the receipt is unchanged and signed by this key."""
        return verify_receipt(receipt.as_dict() if isinstance(receipt, Receipt) else receipt,
                              public_key_pem)
