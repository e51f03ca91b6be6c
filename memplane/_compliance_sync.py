"""GENERATED from _compliance_async.py by scripts/unasync.py: do not edit.

Edit _compliance_async.py and run ``python scripts/unasync.py``; a test checks the two agree.
"""

from __future__ import annotations

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
from ._namespace_sync import _Namespace
from ._receipts import verify_receipt

__all__ = ["ExportsAPI", "JobsAPI", "ReceiptsAPI"]


class JobsAPI(_Namespace):
    """Background jobs; reached as ``client.jobs``."""

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
            delay = next_delay(delay)


class ExportsAPI(_Namespace):
    """Finished exports; reached as ``client.exports``."""

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


class ReceiptsAPI(_Namespace):
    """Signed erasure receipts; reached as ``client.receipts``."""

    def get(self, receipt_id: str) -> Receipt:
        return self._client._send(receipt_get(receipt_id))

    def public_key(self) -> str:
        """The server's receipt signing key, PEM."""
        return self._client._send(receipt_public_key())

    @staticmethod
    def verify(receipt: Receipt | Mapping[str, Any], public_key_pem: str | bytes) -> bool:
        """Offline: True when the receipt is unchanged and signed by this key."""
        return verify_receipt(receipt.as_dict() if isinstance(receipt, Receipt) else receipt,
                              public_key_pem)
