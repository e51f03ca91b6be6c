"""The administrative namespaces of ``AsyncClient``: ``client.audit``, ``client.keys``,
``client.tenants``, ``client.teams`` and ``client.storage``.

``_admin_sync.py`` is generated from this file by ``scripts/unasync.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from . import _base
from ._config_calls import seed_storage_config
from ._governance_async import AsyncStorageConfigsAPI
from ._models import (
    ApiKey,
    AuditEntry,
    AuditVerification,
    CreatedKey,
    CreatedTenant,
    Page,
    StorageConfig,
    StorageHealth,
)
from ._namespace_async import _Namespace
from ._team_calls import Team, team_delete, team_get, team_list, team_put

__all__ = ["AsyncAuditAPI", "AsyncKeysAPI", "AsyncStorageAPI", "AsyncTeamsAPI",
           "AsyncTenantsAPI"]


class AsyncAuditAPI(_Namespace):
    """The tenant's access log (compliance role); reached as ``client.audit``."""

    async def list(
        self,
        *,
        pointer_id: str | None = None,
        accessor_id: str | None = None,
        operation: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[AuditEntry]:
        """One page of audit entries matching the filters."""
        return await self._client._send(
            _base.audit_list(
                pointer_id=pointer_id,
                accessor_id=accessor_id,
                operation=operation,
                since=since,
                until=until,
                limit=limit,
                cursor=cursor,
            )
        )

    def iter(
        self,
        *,
        pointer_id: str | None = None,
        accessor_id: str | None = None,
        operation: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[AuditEntry]:
        """Every matching audit entry, fetching pages of ``limit`` lazily."""
        return self._client._iterate(
            lambda cursor: _base.audit_list(
                pointer_id=pointer_id,
                accessor_id=accessor_id,
                operation=operation,
                since=since,
                until=until,
                limit=limit,
                cursor=cursor,
            )
        )

    async def verify(self) -> AuditVerification:
        """Check the audit hash chain; ``ok`` is False and ``first_bad_seq`` set on a break."""
        return await self._client._send(_base.audit_verify())


class AsyncKeysAPI(_Namespace):
    """API keys of the caller's tenant (admin role); reached as ``client.keys``."""

    async def create(
        self, *, role: str, name: str, idempotency_key: str | None = None,
        scopes: Sequence[_base.ScopeGrant] | None = None, agent_id: str | None = None,
        user_id: str | None = None,
    ) -> CreatedKey:
        """Create a key with ``role`` (admin | agent | compliance | user); its secret is shown
        once.

        An agent key may be scoped: ``scopes`` lists the (scope, scope_ref) pairs it may see
        — tuples or ``{"scope", "scope_ref"}`` dicts, ``"*"`` for any ref of a scope, ``"-"``
        for tenant memory — and everything else answers ``NotFound`` to it. ``agent_id`` is
        recorded as the agent of what the key writes and in its audit rows.

        A ``user`` key is a data subject's own key (``user_id`` required): it reads, writes,
        searches and exports only that subject's memories, and never erases them.
        """
        return await self._client._send(
            _base.keys_create(role=role, name=name, idempotency_key=idempotency_key,
                              scopes=scopes, agent_id=agent_id, user_id=user_id)
        )

    async def list(self, *, include_revoked: bool = False) -> list[ApiKey]:
        """The tenant's keys, oldest first: id, prefix, role, name, scopes, agent, created
        and last used (to the hour); never a secret."""
        return await self._client._send(_base.keys_list(include_revoked=include_revoked))

    async def delete(self, key_id: str) -> None:
        """Revoke the key with this id."""
        await self._client._send(_base.keys_delete(key_id))


class AsyncTeamsAPI(_Namespace):
    """Teams of agents (admin keys change them; an agent key reads its own teams); reached
    as ``client.teams``."""

    async def put(self, team_id: str, *, agents: Iterable[str],
                  name: str | None = None) -> Team:
        """Create or replace the team: its name and its whole list of member agents. A
        member's agent key reads and writes ``team/<team_id>`` memory without a grant; an
        agent left out loses that on its next request."""
        return await self._client._send(team_put(team_id, agents=agents, name=name))

    update = put  # the name ``client.agents`` uses for its PUT

    async def get(self, team_id: str) -> Team:
        """The team and its member agents; ``NotFound`` if there is none the key may see."""
        return await self._client._send(team_get(team_id))

    async def list(self, *, limit: int | None = None,
                   cursor: str | None = None) -> Page[Team]:
        """One page of teams by id; pass the page's ``next_cursor`` back for the next."""
        return await self._client._send(team_list(limit=limit, cursor=cursor))

    def iter(self, *, limit: int | None = None) -> AsyncIterator[Team]:
        """Every team the key may see, fetching pages lazily."""
        return self._client._iterate(lambda cursor: team_list(limit=limit, cursor=cursor))

    async def delete(self, team_id: str) -> None:
        """Delete the team and its membership list; its memories stay."""
        await self._client._send(team_delete(team_id))


class AsyncTenantsAPI(_Namespace):
    """Tenant creation (server bootstrap key only); reached as ``client.tenants``."""

    async def create(self, *, name: str, idempotency_key: str | None = None) -> CreatedTenant:
        """Create a tenant; the answer carries its first admin key, shown once."""
        return await self._client._send(
            _base.tenants_create(name=name, idempotency_key=idempotency_key)
        )


class AsyncStorageAPI(AsyncStorageConfigsAPI, _Namespace):
    """The tenant's own bucket (admin role; compliance may read the configuration);
    reached as ``client.storage``."""

    async def configure(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        storage_type: str | None = None,
        connection_config: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> StorageConfig:
        """Point the tenant's new memories at its own bucket.

        ``storage_type`` is ``s3``, ``gcs``, ``azure`` or ``local``; ``connection_config``
        holds that backend's settings (bucket, region, endpoint, credentials, prefix). The
        server probes the bucket first and raises ``BadRequest`` naming what failed, saving
        nothing; secrets are stored encrypted and never returned. Memories written before
        stay readable where they are. ``config`` may instead give the seed's flat shape,
        ``{"type": "gcs", "bucket": ..., "region": "europe-west1", ...}``; a declared
        region must be the bucket's own.
        """
        if config is not None:
            storage_type, connection_config = seed_storage_config(config)
        if storage_type is None or connection_config is None:
            raise ValueError("give storage_type and connection_config, or config")
        return await self._client._send(
            _base.storage_configure(
                storage_type=storage_type,
                connection_config=connection_config,
                idempotency_key=idempotency_key,
            )
        )

    async def get_config(self) -> StorageConfig:
        """The active configuration, without secrets."""
        return await self._client._send(_base.storage_get_config())

    async def health_check(self) -> StorageHealth:
        """Probe the bucket (write, read, delete) and report latency, region, versioning,
        soft delete and object lock. A failing bucket answers ``ok=False``, not an error."""
        return await self._client._send(_base.storage_health())
