"""A GCS media download, read bounded (storage_adapters/bounded).

The library's downloads (``download_as_bytes``) hold the whole answer in memory, however
much the server sends; so the adapter sends the same request (``GET
{endpoint}/download/storage/v1/b/{bucket}/o/{object}?alt=media``, optionally a
``generation`` and a ``Range``) through its own authorised ``requests`` session, streamed,
and reads the body here. An error status is raised as the library would raise it
(``google.api_core.exceptions``) and a failed connection as ``requests`` raises it, for the
adapter to translate (an endpoint the guard refused among them); a broken-off body is
StorageUnavailable.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import google_crc32c
import requests
import urllib3.exceptions
from google.api_core import exceptions as gexc

from .base import IntegrityError, StorageError, StorageUnavailable
from .bounded import Deadline, read_bounded, urllib3_read1
from .netguard import refusal_in

GOOGLE_STORAGE = "https://storage.googleapis.com"
_ERROR_BYTES = 64 << 10  # what of an error answer is read, for its message


def media_url(endpoint: str | None, bucket: str, key: str, generation: int | None = None
              ) -> str:
    url = (f"{(endpoint or GOOGLE_STORAGE).rstrip('/')}/download/storage/v1/b/"
           f"{quote(bucket, safe='')}/o/{quote(key, safe='')}?alt=media")
    return url + (f"&generation={int(generation)}" if generation is not None else "")


def download(session: Any, url: str, *, max_bytes: int | None, deadline: Deadline,
             where: str, timeout: tuple[float, float], attempts: int,
             byte_range: tuple[int, int] | None = None, check_crc: bool = True) -> bytes:
    """The object's bytes (or those of ``byte_range``, both ends included): at most
    ``max_bytes``, before ``deadline``; a whole object's CRC32C is checked against the one
    GCS sent (``x-goog-hash``). Transient failures are tried again, ``attempts`` in all,
    while the deadline lasts."""
    for attempt in range(1, max(1, attempts) + 1):
        try:
            return _download(session, url, max_bytes=max_bytes, deadline=deadline,
                             where=where, timeout=timeout, byte_range=byte_range,
                             check_crc=check_crc)
        except (requests.ConnectionError, requests.Timeout, gexc.ServerError,
                gexc.TooManyRequests) as exc:
            if attempt >= attempts or deadline.remaining() <= 0 or refusal_in(exc):
                raise
    raise AssertionError("unreachable")


def _download(session: Any, url: str, *, max_bytes: int | None, deadline: Deadline,
              where: str, timeout: tuple[float, float], byte_range: tuple[int, int] | None,
              check_crc: bool) -> bytes:
    deadline.check(where)
    headers = {"Accept-Encoding": "identity"}
    if byte_range is not None:
        headers["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
    read_timeout = max(0.001, min(timeout[1], deadline.remaining()))
    response = session.get(url, headers=headers, stream=True,
                           timeout=(timeout[0], read_timeout))
    try:
        read1 = urllib3_read1(response.raw)
        if response.status_code >= 400:
            message = read_bounded(read1, max_bytes=_ERROR_BYTES, deadline=deadline,
                                   where=where, announced=None)
            raise gexc.from_http_status(response.status_code,
                                        message[:300].decode("utf-8", "replace"))
        data = read_bounded(read1, max_bytes=max_bytes, deadline=deadline, where=where,
                            announced=response.headers.get("Content-Length"))
    except StorageError:
        raise
    except (urllib3.exceptions.HTTPError, requests.RequestException, OSError) as exc:
        raise StorageUnavailable(f"{where}: the read broke off ({type(exc).__name__})"
                                 ) from None
    finally:
        response.close()
    stored = _crc32c(response.headers.get("x-goog-hash", ""))
    if check_crc and stored is not None:
        crc = google_crc32c.Checksum(data)
        if base64.b64encode(crc.digest()).decode() != stored:
            raise IntegrityError(f"{where}: CRC32C mismatch on download")
    return data


def pieces(fetch: Any, total: int, step: int) -> Iterator[bytes]:
    """``fetch((start, end))`` for each range of ``step`` bytes of ``total``."""
    for start in range(0, total, step):
        yield fetch((start, min(start + step, total) - 1))


def _crc32c(header: str) -> str | None:
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "crc32c" and value:
            return value
    return None
