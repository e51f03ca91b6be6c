"""An Azure blob download, read bounded (storage_adapters/bounded).

The SDK's downloads (``download_blob().readall()``, even one ranged request of its
``chunks()``) read each answer whole into memory, however much the service sends; so the
adapter sends the same ``GET`` of the blob (optionally ``x-ms-range`` and ``If-Match``)
through the blob client's own pipeline (its credential policy signs it, its retry policy
and request counting apply), streamed, and reads the body here. An error status is raised
as the SDK raises it (``azure.core.exceptions``, with the service's ``x-ms-error-code``),
for the adapter to translate; a broken-off body is StorageUnavailable.
"""

from __future__ import annotations

from typing import Any

import requests
import urllib3.exceptions
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.core.rest import HttpRequest

from .base import StorageError, StorageUnavailable
from .bounded import Deadline, read_bounded, urllib3_read1

_ERRORS = {401: ClientAuthenticationError, 403: ClientAuthenticationError,
           404: ResourceNotFoundError, 412: ResourceModifiedError}


def download(blob: Any, *, max_bytes: int | None, deadline: Deadline, where: str,
             read_timeout: float, byte_range: tuple[int, int] | None = None,
             etag: str | None = None) -> tuple[bytes, Any]:
    """The blob's bytes (or those of ``byte_range``, both ends included), at most
    ``max_bytes``, before ``deadline``; and the answer's headers."""
    deadline.check(where)
    headers = {"x-ms-version": blob.api_version, "Accept-Encoding": "identity"}
    if byte_range is not None:
        headers["x-ms-range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
    if etag is not None:
        headers["If-Match"] = etag
    answer = blob._pipeline.run(  # the SDK's own pipeline: signing, retries, counting
        HttpRequest("GET", blob.url, headers=headers), stream=True,
        read_timeout=max(0.001, min(read_timeout, deadline.remaining())))
    response = answer.http_response
    raw = getattr(getattr(response, "internal_response", None), "raw", None)
    try:
        if raw is None:
            raise StorageUnavailable(f"{where}: the transport cannot stream a download")
        read1 = urllib3_read1(raw)
        if response.status_code >= 300:
            read_bounded(read1, max_bytes=64 << 10, deadline=deadline, where=where)
            error = _ERRORS.get(response.status_code, HttpResponseError)(
                f"HTTP {response.status_code}", response=None)
            error.status_code = response.status_code
            error.error_code = response.headers.get("x-ms-error-code")  # type: ignore[attr-defined]
            raise error
        data = read_bounded(read1, max_bytes=max_bytes, deadline=deadline, where=where,
                            announced=response.headers.get("Content-Length"))
    except StorageError:
        raise
    except (urllib3.exceptions.HTTPError, requests.RequestException, OSError) as exc:
        raise StorageUnavailable(f"{where}: the read broke off ({type(exc).__name__})"
                                 ) from None
    finally:
        response.close()
    return data, response.headers
