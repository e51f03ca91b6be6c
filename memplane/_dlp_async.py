"""The tenant's DLP policy, for ``AsyncClient``: ``client.dlp`` (admin role).

This file is the one written by hand; ``_dlp_sync.py`` is generated from it by
``scripts/unasync.py`` (a test fails when the two drift apart).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import _dlp as dlp
from ._dlp import DlpPolicy
from ._namespace_async import AsyncSender

__all__ = ["AsyncDlpAPI"]


class AsyncDlpAPI:
    """The tenant's DLP guard (admin role); reached as ``client.dlp``. A write the policy
    refuses raises ``memplane.SensitiveData`` naming the kinds, never the value."""

    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def get_policy(self) -> DlpPolicy:
        """The tenant's policy; never set: the defaults (flag, every kind)."""
        return await self._client._send(dlp.get_policy())

    async def set_policy(self, *, mode: str, kinds: Sequence[str] | None = None) -> DlpPolicy:
        """Set what explicit writes do with a detected value: ``off``, ``flag`` (tag it
        ``sensitive:<kind>``), ``redact`` (store ``[redacted:<kind>]``) or ``refuse`` (422,
        nothing written); ``kinds`` limits detection to those (default: every kind)."""
        return await self._client._send(dlp.set_policy(mode, kinds))
