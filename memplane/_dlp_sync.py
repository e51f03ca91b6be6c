"""GENERATED from _dlp_async.py by scripts/unasync.py: do not edit.

Edit _dlp_async.py and run ``python scripts/unasync.py``; a test checks the two agree.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import _dlp as dlp
from ._dlp import DlpPolicy
from ._namespace_sync import Sender

__all__ = ["DlpAPI"]


class DlpAPI:
    """The tenant's DLP guard (admin role); reached as ``client.dlp``. A write the policy
    refuses raises ``memplane.SensitiveData`` naming the kinds, never the value."""

    def __init__(self, client: Sender) -> None:
        self._client = client

    def get_policy(self) -> DlpPolicy:
        """The tenant's policy; never set: the defaults (flag, every kind)."""
        return self._client._send(dlp.get_policy())

    def set_policy(self, *, mode: str, kinds: Sequence[str] | None = None) -> DlpPolicy:
        """Set what explicit writes do with a detected value: ``off``, ``flag`` (tag it
        ``sensitive:<kind>``), ``redact`` (store ``[redacted:<kind>]``) or ``refuse`` (422,
        nothing written); ``kinds`` limits detection to those (default: every kind)."""
        return self._client._send(dlp.set_policy(mode, kinds))
