"""GENERATED from _governance_async.py by scripts/unasync.py: do not edit.

Edit _governance_async.py and run ``python scripts/unasync.py``; a test checks the two agree.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from . import _config_calls as config_calls
from . import _hygiene as hygiene
from . import _layer_calls as calls
from . import _routing as routing
from ._compliance import Job
from ._config_calls import Agent
from ._hygiene import LegalHold, RetentionPolicy
from ._models import (
    CompactorConfig,
    EmbedderConfig,
    Page,
    Provenance,
    StorageConfig,
    SummarizerConfig,
)
from ._namespace_sync import Sender
from ._routing import ModelRoutes, Resummarized

__all__ = ["AgentsAPI", "CompactorAPI", "EmbedderAPI", "LegalHoldsAPI",
           "ModelRoutesAPI", "RetentionAPI", "StorageConfigsAPI",
           "SummarizerAPI"]


class CompactorAPI:
    """The daily compactor (admin role); reached as ``client.compactor``."""

    def __init__(self, client: Sender) -> None:
        self._client = client

    def run(self, *, dry_run: bool = False, scope: str | None = None,
                  scope_ref: str | None = None) -> Job:
        """Compact the caller's tenant now (or one scope, or one scope ref) and return the
        queued job; wait with ``client.jobs.wait(job.id)``: its ``result`` counts the buckets,
        events compressed and entries written. ``dry_run`` only counts. Safe beside the
        daily run: no event is ever summarised twice."""
        return self._client._send(
            calls.compactor_run(dry_run=dry_run, scope=scope, scope_ref=scope_ref))

    def get_config(self) -> CompactorConfig:
        """The tenant's thresholds (defaults: 3 events, older than 90 days) and the
        server's schedule."""
        return self._client._send(calls.compactor_get_config())

    def set_config(self, *, min_events: int | None = None,
                         older_than_days: int | None = None,
                         enabled: bool | None = None) -> CompactorConfig:
        """Set the tenant's thresholds (a PUT: a setting left as None takes its default)."""
        return self._client._send(calls.compactor_set_config({
            "min_events": min_events, "older_than_days": older_than_days,
            "enabled": enabled}))

    def provenance(self, entry_id: str) -> Provenance:
        """The summariser (provider, model, prompt version) and the id and SHA-256 of every
        event a compactor entry summarises."""
        return self._client._send(calls.compactor_provenance(entry_id))

    def resummarize(self, entry_id: str) -> Resummarized:
        """Write a new version of a compactor entry from the events it summarised, with the
        summariser the compactor would use now (e.g. after a model change). ``NotFound``
        for an unknown entry; ``Conflict`` (``provenance_gone``) when some of its events
        were erased or deleted since: the entry stays as it was."""
        return self._client._send(routing.compactor_resummarize(entry_id))


class ModelRoutesAPI:
    """The tenant's model routing (admin to change, compliance may read); reached as
    ``client.model_routes``."""

    def __init__(self, client: Sender) -> None:
        self._client = client

    def get(self) -> ModelRoutes:
        """The rules (without their keys) and the fallback they leave to."""
        return self._client._send(routing.model_routes_get())

    def set(self, *, rules: Sequence[Mapping[str, Any]]) -> ModelRoutes:
        """Replace the rules: each a mapping with ``purpose`` (``compaction``,
        ``conversation_summary``, ``extraction``), optionally ``scope``, ``base_url``,
        ``model``, ``api_key``, ``timeout_seconds``, ``max_retries`` and
        ``token_budget_per_run``. The server probes every endpoint first and saves nothing
        unless all answer (``BadRequest`` names the rule); keys are never returned. ``[]``
        removes every rule."""
        return self._client._send(routing.model_routes_set(rules))


class SummarizerAPI:
    """The tenant's summariser for the compactor (admin role); reached as
    ``client.summarizer``."""

    def __init__(self, client: Sender) -> None:
        self._client = client

    def get_config(self) -> SummarizerConfig:
        """The configured summariser, without its API key (the offline one if none)."""
        return self._client._send(calls.summarizer_get_config())

    def set_config(self, *, base_url: str, model: str, api_key: str | None = None,
                         timeout_seconds: float | None = None, max_retries: int | None = None,
                         token_budget_per_run: int | None = None) -> SummarizerConfig:
        """Route the tenant's summaries to an OpenAI-compatible chat endpoint (``base_url``
        like ``https://api.openai.com/v1``). The server probes it first, under the same
        network rules as storage endpoints, and raises ``BadRequest`` naming what failed,
        saving nothing; the API key is stored sealed and never returned. Settings left as
        None take the server's defaults (timeout 30 s per attempt, 2 retries, the server's
        token budget per run)."""
        return self._client._send(calls.summarizer_set_config({
            "base_url": base_url, "model": model, "api_key": api_key,
            "timeout_seconds": timeout_seconds, "max_retries": max_retries,
            "token_budget_per_run": token_budget_per_run}))

    def delete_config(self) -> SummarizerConfig:
        """Go back to the built-in offline extractive summariser (the stored key is
        deleted); returns that configuration."""
        return self._client._send(calls.summarizer_delete_config())


class EmbedderAPI:
    """The tenant's embedder for search (admin to change, compliance may read); reached as
    ``client.embedder``."""

    def __init__(self, client: Sender) -> None:
        self._client = client

    def get_config(self) -> EmbedderConfig:
        """The configured embeddings endpoint, without its API key (the server's default
        embedder if none)."""
        return self._client._send(calls.embedder_get_config())

    def set_config(self, *, base_url: str, model: str, api_key: str | None = None,
                         timeout_seconds: float | None = None,
                         max_retries: int | None = None) -> EmbedderConfig:
        """Embed the tenant's memories and queries with an OpenAI-compatible embeddings
        endpoint (``base_url`` like ``https://api.openai.com/v1``). The server probes it
        first, under the same network rules as storage endpoints, and raises ``BadRequest``
        naming what failed, saving nothing; the API key is stored sealed, never returned."""
        return self._client._send(calls.embedder_set_config({
            "base_url": base_url, "model": model, "api_key": api_key,
            "timeout_seconds": timeout_seconds, "max_retries": max_retries}))

    def delete_config(self) -> EmbedderConfig:
        """Go back to the server's default embedder (the stored key is deleted)."""
        return self._client._send(calls.embedder_delete_config())


class AgentsAPI:
    """Agents and their memory settings; reached as ``client.agents``."""

    def __init__(self, client: Sender) -> None:
        self._client = client

    def update(self, agent_id: str, settings: Mapping[str, Any] | None = None, *,
                     name: str | None = None, user_memory_enabled: bool | None = None,
                     retention: str | None = None, storage_config_id: str | None = None,
                     memory: Mapping[str, Any] | None = None) -> Agent:
        """Create or replace the agent's settings (a PUT: what is left out takes its
        default). As the seed writes it: ``update(agent_id='support-bot',
        memory={'userMemory': {'enabled': True, 'retention': '90d',
        'storageConfigId': 'sc_…'}})`` (snake_case ``user_memory`` too); or ``settings``,
        the whole body ``{"memory": {...}}``; or the keyword arguments. The agent's user
        memories (scope ``user``, or written with a ``user_id``) then go to that storage
        configuration; ``enabled=False`` makes their writes raise ``Conflict``."""
        return self._client._send(config_calls.agent_update(
            agent_id, settings, name=name, user_memory_enabled=user_memory_enabled,
            retention=retention, storage_config_id=storage_config_id, memory=memory))

    def get(self, agent_id: str) -> Agent:
        """The agent's settings; ``NotFound`` if it has none."""
        return self._client._send(config_calls.agent_get(agent_id))

    def list(self, *, limit: int | None = None,
                   cursor: str | None = None) -> Page[Agent]:
        """One page of agents by id; pass the page's ``next_cursor`` back for the next."""
        return self._client._send(config_calls.agent_list(limit=limit, cursor=cursor))

    def iter(self, *, limit: int | None = None) -> Iterator[Agent]:
        """Every agent, fetching pages lazily."""
        return self._client._iterate(
            lambda cursor: config_calls.agent_list(limit=limit, cursor=cursor))

    def delete(self, agent_id: str) -> None:
        """Forget the agent's settings; its memories stay where they are."""
        self._client._send(config_calls.agent_delete(agent_id))


class StorageConfigsAPI:
    """Several named storage configurations per tenant (admin role; compliance may read);
    mixed into ``client.storage``. Configurations are addressed by ``sc_…`` ids."""

    _client: Sender

    def create_config(self, name: str, storage_type: str | None = None,
                            connection_config: Mapping[str, Any] | None = None, *,
                            config: Mapping[str, Any] | None = None,
                            make_default: bool = False,
                            idempotency_key: str | None = None) -> StorageConfig:
        """Add a named bucket configuration. The server probes the bucket and checks its
        declared ``region`` against the bucket's own location first, raising ``BadRequest``
        naming what failed (both regions on a mismatch) and saving nothing. ``config`` may
        instead give the seed's flat shape ``{"type": "gcs", "bucket": ..., "region": ...}``.
        ``make_default`` also makes it where new memories go."""
        if config is not None:
            storage_type, connection_config = config_calls.seed_storage_config(config)
        if storage_type is None or connection_config is None:
            raise ValueError("give storage_type and connection_config, or config")
        return self._client._send(config_calls.config_create(
            name=name, storage_type=storage_type, connection_config=connection_config,
            make_default=make_default, idempotency_key=idempotency_key))

    def list_configs(self) -> list[StorageConfig]:
        """Every configuration of the tenant, without secrets: the default first."""
        return (self._client._send(config_calls.config_list())).items

    def get_config_by_id(self, storage_config_id: str) -> StorageConfig:
        """One configuration by its ``sc_…`` id; ``NotFound`` if absent."""
        return self._client._send(config_calls.config_get(storage_config_id))

    def rename_config(self, storage_config_id: str, name: str) -> StorageConfig:
        """Rename a configuration (its bucket and credentials never change in place)."""
        return self._client._send(config_calls.config_rename(storage_config_id, name))

    def set_default_config(self, storage_config_id: str) -> StorageConfig:
        """New memories go to this configuration from now on; older ones stay readable."""
        return self._client._send(config_calls.config_make_default(storage_config_id))

    def delete_config(self, storage_config_id: str) -> None:
        """Delete a configuration; ``Conflict`` while it is the default, holds memories or
        events (the error counts them) or an agent routes to it."""
        self._client._send(config_calls.config_delete(storage_config_id))


class RetentionAPI:
    """Retention policies and runs; reached as ``client.retention`` (admin changes them,
    compliance may read them)."""

    def __init__(self, client: Sender) -> None:
        self._client = client

    def set_policy(self, *, scope: str, retention_days: int, auto_delete: bool,
                         memory_type: str | None = None,
                         archive_after_days: int | None = None,
                         keep_importance_at_least: int | None = None) -> RetentionPolicy:
        """Create or replace the policy of ``scope`` and ``memory_type`` (None: every type of
        the scope that no policy of its own covers; ``event``: raw events; ``entry``: curated
        entries). With ``auto_delete`` the daily run deletes what was last written
        ``retention_days`` ago or more, on both planes with every object version; without it
        the run only reports what is due. ``archive_after_days`` moves older objects to the
        bucket's colder class first. ``keep_importance_at_least`` (1-5) keeps memories and
        entries of that importance or more whatever their age."""
        return self._client._send(hygiene.retention_put(
            scope=scope, retention_days=retention_days, auto_delete=auto_delete,
            memory_type=memory_type, archive_after_days=archive_after_days,
            keep_importance_at_least=keep_importance_at_least))

    def list_policies(self) -> list[RetentionPolicy]:
        """The tenant's policies."""
        page = self._client._send(hygiene.retention_list())
        return list(page.items)

    def delete_policy(self, policy_id: str) -> None:
        """Delete a policy; ``NotFound`` if absent."""
        self._client._send(hygiene.retention_delete(policy_id))

    def run(self, *, dry_run: bool = False) -> Job:
        """Apply the policies and purge expired ``ttl_days`` memories now; returns the queued
        job (wait with ``client.jobs.wait(job.id)``): its ``result`` counts, per policy, what
        was due, deleted, held and archived. ``dry_run`` only counts."""
        return self._client._send(hygiene.retention_run(dry_run=dry_run))


class LegalHoldsAPI:
    """Legal holds (admin or compliance); reached as ``client.legal_holds``."""

    def __init__(self, client: Sender) -> None:
        self._client = client

    def place(self, *, reason: str, user_id: str | None = None,
                    scope: str | None = None, scope_ref: str | None = None,
                    tenant: bool = False, idempotency_key: str | None = None) -> LegalHold:
        """Hold a data subject (``user_id``), a scope ref (``scope`` + ``scope_ref``) or the
        whole tenant (``tenant=True``); ``reason`` is litigation, regulatory, investigation,
        audit or other. Retention and cleanup pass over what it covers, deletes of it raise
        ``Conflict`` (``legal_hold``), and the subject's erasure is refused until it is
        lifted."""
        return self._client._send(hygiene.hold_place({
            "reason": reason, "user_id": user_id, "scope": scope, "scope_ref": scope_ref,
            "tenant": tenant or None}, idempotency_key))

    def list(self) -> list[LegalHold]:
        """Every hold of the tenant, active and lifted, oldest first."""
        page = self._client._send(hygiene.hold_list())
        return list(page.items)

    def lift(self, hold_id: str) -> LegalHold:
        """Lift a hold (audited with the key and the time); the held subject's id is then
        kept only as a keyed hash."""
        return self._client._send(hygiene.hold_lift(hold_id))
