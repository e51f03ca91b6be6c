"""The DLP policy in the SDK: its answer and request builders (``client.dlp``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from ._base import Call, parse_model

__all__ = ["DlpPolicy", "get_policy", "set_policy"]

KINDS = ("card", "ssn", "iban", "private_key", "cloud_key", "bearer_token", "password")
MODES = ("off", "flag", "redact", "refuse")


class DlpPolicy(BaseModel):
    """What the tenant's explicit writes do with a detected sensitive value (``mode``: off,
    flag, redact or refuse) and which ``kinds`` are detected; ``is_default`` while the
    tenant never set one. ``extracted_mode`` is what happens to an extracted memory."""

    model_config = ConfigDict(extra="allow")

    mode: str
    kinds: list[str]
    is_default: bool
    extracted_mode: str = "refuse"
    updated_at: datetime | None = None


def get_policy() -> Call[DlpPolicy]:
    return Call("GET", "/v1/dlp/policy", parse_model(DlpPolicy))


def set_policy(mode: str, kinds: Sequence[str] | None) -> Call[DlpPolicy]:
    if isinstance(kinds, str):
        raise TypeError("kinds is a list of kinds, e.g. ['card', 'ssn'], not one string")
    body: dict[str, object] = {"mode": mode}
    if kinds is not None:
        body["kinds"] = list(kinds)
    return Call("PUT", "/v1/dlp/policy", parse_model(DlpPolicy), json=body)
