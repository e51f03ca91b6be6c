"""The audit log's signed notes: a tenant's origin line, the signer, and its checkpoints
(``transparency.py`` says what they look like)."""

from __future__ import annotations

import base64
import uuid

from ..settings import Settings
from ..signing import signing_key
from ..tlog import note


def origin(settings: Settings, tenant_id: uuid.UUID) -> str:
    return f"{settings.audit_log_name}/audit/{tenant_id}"


def signer(settings: Settings) -> note.Signer:
    return note.Signer(settings.audit_log_name, signing_key(settings).private)


def signed_checkpoint(settings: Settings, tenant_id: uuid.UUID, size: int, root: bytes) -> str:
    """The signed note of the tenant's tree of ``size`` rows whose head is ``root``."""
    return note.sign(note.Checkpoint(origin(settings, tenant_id), size, root).text(),
                     signer(settings))


def encoded(hashes: list[bytes]) -> list[str]:
    return [base64.b64encode(h).decode() for h in hashes]
