"""Per-tenant embedder routing: configure, show and remove a tenant's embeddings endpoint,
and build the embedder search uses. The same rules as the summariser
(control_plane/summarizers/service.py):

Configure — prove the endpoint answers before anything is saved:
  1. the URL passes the endpoint guard (MEMPLANE_ALLOWED_ENDPOINTS plus the hosted APIs of
     MEMPLANE_SUMMARIZER_PUBLIC_HOSTS; no loopback, private, link-local or metadata address
     after DNS);
  2. one embeddings call with one short text (no retry), which also tells the dimension; a
     failure answers 422 with a generic problem code and a fixed sentence — never what the
     remote answered — and nothing is saved;
  3. one transaction: replace the tenant's row (API key sealed with the server key, bound to
     the tenant and row id), audit, commit.

No transaction is open while the endpoint is probed. The key is never returned, logged or
audited; audit rows name the host, the model and whether a key is set.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import NoReturn
from urllib.parse import urlsplit

import numpy as np
from sqlalchemy.orm import Session

from ..audit import service as audit
from ..audit.service import audited
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import EmbedderConfig
from ..errors import InvalidInput, StorageMisconfigured
from ..identity import Actor
from ..plane.credentials import CredentialBox, CredentialsUnreadable, load_server_key
from ..settings import Settings
from ..summarizers.service import endpoint_policy
from . import SENTENCES, Embedder, EmbedderFailed, Running
from . import repository as repo
from .defaults import default_embedder
from .openai_compat import PROVIDER, OpenAICompatibleEmbedder
from .schemas import EmbedderConfigIn, EmbedderConfigOut

log = logging.getLogger(__name__)

PROBE_TIMEOUT_CAP = 10.0


def associated_data(tenant_id: uuid.UUID, config_id: uuid.UUID) -> bytes:
    """Binds a sealed API key to its row: copied onto another row, it does not open."""
    return f"memplane embedder_configs {tenant_id} {config_id}".encode()


def _settings_and_box(runtime_or_settings: Running | Settings
                      ) -> tuple[Settings, CredentialBox | None]:
    if isinstance(runtime_or_settings, Settings):
        return runtime_or_settings, CredentialBox(load_server_key(runtime_or_settings))
    return runtime_or_settings.settings, runtime_or_settings.plane.credentials


def _box(box: CredentialBox | None) -> CredentialBox:
    if box is None:
        raise StorageMisconfigured("the server has no key to seal an embedder API key")
    return box


class _Unusable:
    """A configured endpoint whose key cannot be opened: every call fails (and is retried
    later) until the tenant configures the embedder again. Keeps the configured name, so
    no vector of another embedder is mixed into the tenant's."""

    def __init__(self, name: str, dim: int, code: str) -> None:
        self.name = name
        self.dim = dim
        self.code = code

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise EmbedderFailed(self.code, SENTENCES[self.code])


def build_for_tenant(session: Session, runtime_or_settings: Running | Settings,
                     tenant_id: uuid.UUID, *,
                     sleep: Callable[[float], None] = time.sleep) -> Embedder:
    """The tenant's configured endpoint, else the server's default embedder."""
    config = repo.get(session, tenant_id)
    settings, box = _settings_and_box(runtime_or_settings)
    if config is None:
        return default_embedder(settings.embedder)
    api_key: str | None = None
    if config.api_key_encrypted is not None:
        try:
            api_key = _box(box).open(config.api_key_encrypted,
                                     aad=associated_data(tenant_id, config.id))["api_key"]
        except (CredentialsUnreadable, KeyError, StorageMisconfigured):
            log.warning("the embedder key of tenant %s does not open with this server key",
                        tenant_id)
            return _Unusable(f"openai:{config.model}", config.dim, "credentials_unreadable")
    return OpenAICompatibleEmbedder(
        base_url=config.base_url, model=config.model, api_key=api_key,
        policy=endpoint_policy(settings), dim=config.dim,
        timeout_seconds=config.timeout_ms / 1000, max_retries=config.max_retries,
        max_batch=settings.embedder_max_batch,
        max_retry_wait=settings.summarizer_max_retry_wait_seconds, sleep=sleep)


def _refuse(code: str) -> NoReturn:
    raise InvalidInput(f"{SENTENCES.get(code, 'the embeddings endpoint failed')} ({code}); "
                       "nothing was saved — fix the base_url, model or api_key and retry",
                       problem=code)


def configure(session: Session, runtime_or_settings: Running | Settings, actor: Actor,
              body: EmbedderConfigIn) -> EmbedderConfigOut:
    """Probe the endpoint, then make it the tenant's embedder."""
    settings, box = _settings_and_box(runtime_or_settings)
    host = urlsplit(body.base_url).hostname or ""
    key = body.api_key.get_secret_value() if body.api_key is not None else None
    with audited(session, actor, "embedder_config_write",
                 detail=f"provider={PROVIDER} host={host} model={body.model}"):
        session.commit()  # no transaction may stay open across the probe
        probe = OpenAICompatibleEmbedder(
            base_url=body.base_url, model=body.model, api_key=key,
            policy=endpoint_policy(settings),
            timeout_seconds=min(body.timeout_seconds, PROBE_TIMEOUT_CAP), max_retries=0)
        try:
            dim = probe.probe()
        except EmbedderFailed as failed:
            _refuse(failed.code)
        config_id = new_id()
        config = EmbedderConfig(
            id=config_id, tenant_id=actor.tenant_id, provider=PROVIDER,
            base_url=body.base_url, model=body.model, dim=dim,
            api_key_encrypted=(_box(box).seal({"api_key": key},
                                              aad=associated_data(actor.tenant_id, config_id))
                               if key is not None else None),
            timeout_ms=max(1, round(body.timeout_seconds * 1000)),
            max_retries=body.max_retries, created_at=utcnow())
        begin_write(session)
        repo.replace(session, actor.tenant_id, config)
        audit.record(session, actor, "embedder_config_write",
                     detail=f"config {config_id}: provider={PROVIDER} host={host} "
                            f"model={body.model} dim={dim} has_api_key={key is not None} "
                            f"timeout_seconds={body.timeout_seconds:g} "
                            f"max_retries={body.max_retries}")
        session.commit()
    return _out(config, settings)


def get_config(session: Session, runtime_or_settings: Running | Settings,
               actor: Actor) -> EmbedderConfigOut:
    """The tenant's embedder, without its key; the server's default when none is set."""
    settings, _ = _settings_and_box(runtime_or_settings)
    config = repo.get(session, actor.tenant_id)
    session.commit()
    begin_write(session)
    audit.record(session, actor, "embedder_config_read",
                 detail=f"config {config.id}" if config is not None else "default")
    session.commit()
    return _out(config, settings)


def delete_config(session: Session, runtime_or_settings: Running | Settings,
                  actor: Actor) -> EmbedderConfigOut:
    """Back to the server's default; the sealed key goes with the row."""
    settings, _ = _settings_and_box(runtime_or_settings)
    with audited(session, actor, "embedder_config_delete"):
        session.commit()
        begin_write(session)
        removed = repo.remove(session, actor.tenant_id)
        audit.record(session, actor, "embedder_config_delete",
                     detail=f"config {removed} removed" if removed else "nothing configured")
        session.commit()
    return _out(None, settings)


def _out(config: EmbedderConfig | None, settings: Settings) -> EmbedderConfigOut:
    if config is None:
        default = default_embedder(settings.embedder)
        return EmbedderConfigOut(
            provider="semantic" if settings.embedder == "semantic" else "hash",
            base_url=None, model=default.name, dim=default.dim, has_api_key=False,
            timeout_seconds=None, max_retries=None, configured_at=None)
    return EmbedderConfigOut(
        provider="openai_compatible", base_url=config.base_url, model=f"openai:{config.model}",
        dim=config.dim, has_api_key=config.api_key_encrypted is not None,
        timeout_seconds=config.timeout_ms / 1000, max_retries=config.max_retries,
        configured_at=config.created_at)


def embedder_for(session: Session, runtime_or_settings: Running | Settings,
                 tenant_id: uuid.UUID) -> Embedder:
    """The embedder for this tenant's new vectors and queries: the OpenAI-compatible
    embeddings endpoint the tenant configured (``PUT /v1/embedder/config``), else the
    server's default (``MEMPLANE_EMBEDDER``). Reads one row; sends nothing."""
    return build_for_tenant(session, runtime_or_settings, tenant_id)
