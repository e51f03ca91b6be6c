"""Compliance endpoints: a data subject's export and erasure, jobs, receipts.

The models and request builders here are shared by the sync and async clients like those in
``_base.py``; the namespaces that send them are in ``_compliance_async.py`` (and the
generated ``_compliance_sync.py``).
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from . import _base
from ._base import Call, parse_model, path_segment

__all__ = ["Job", "Receipt", "download_call", "erase_subject", "export_subject", "job_get",
           "next_delay", "receipt_get", "receipt_public_key"]

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


def next_delay(delay: float) -> float:
    """A job's next polling delay: half as long again, at most 2 s."""
    return min(delay * 1.5, 2.0)
