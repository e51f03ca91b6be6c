"""Per-tenant summariser routing: configure, show and remove a tenant's endpoint, and build
the summariser a compactor run uses.

Configure — prove the endpoint answers before anything is saved:
  1. the URL passes the endpoint guard (the operator's MEMPLANE_ALLOWED_ENDPOINTS plus the
     hosted APIs of MEMPLANE_SUMMARIZER_PUBLIC_HOSTS; no loopback, private, link-local or
     metadata address after DNS);
  2. a one-token chat call with the given model and key (no retry); a failure answers 422
     with a generic problem code (``unreachable``, ``timeout``, ``auth_failed``,
     ``endpoint_refused``, ``endpoint_not_allowed``, ``malformed_answer``, ...) and a fixed
     sentence — never what the remote answered — and nothing is saved;
  3. one transaction: replace the tenant's row (API key sealed with the server key by
     plane/credentials.py, bound to the tenant and row id), audit, commit.

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

from sqlalchemy.orm import Session

from storage_adapters.netguard import EndpointPolicy

from ..audit import service as audit
from ..audit.service import audited
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import SummarizerConfig
from ..errors import InvalidInput, StorageMisconfigured
from ..identity import Actor
from ..plane.credentials import CredentialBox, CredentialsUnreadable, load_server_key
from ..settings import Settings
from . import (
    SENTENCES,
    EventText,
    Running,
    Summarizer,
    SummarizerFailed,
    Summary,
    TokenBudget,
)
from . import repository as repo
from .extractive import MODEL as EXTRACTIVE_MODEL
from .extractive import PROMPT_VERSION as EXTRACTIVE_PROMPT
from .extractive import ExtractiveSummarizer
from .openai_compat import PROVIDER, OpenAICompatibleSummarizer
from .prompt import PROMPT_VERSION
from .schemas import SummarizerConfigIn, SummarizerConfigOut

log = logging.getLogger(__name__)

PROBE_TIMEOUT_CAP = 10.0


def associated_data(tenant_id: uuid.UUID, config_id: uuid.UUID,
                    table: str = "summarizer_configs") -> bytes:
    """Binds a sealed API key to its row: copied onto another row, it does not open."""
    return f"memplane {table} {tenant_id} {config_id}".encode()


def seal_api_key(box: CredentialBox | None, api_key: str, tenant_id: uuid.UUID,
                 row_id: uuid.UUID, *, table: str = "summarizer_configs") -> bytes:
    """An endpoint's API key sealed with the server key, bound to its row of ``table``."""
    return _box(box).seal({"api_key": api_key},
                          aad=associated_data(tenant_id, row_id, table))


def open_api_key(box: object, sealed: bytes, tenant_id: uuid.UUID, row_id: uuid.UUID, *,
                 table: str = "summarizer_configs") -> str:
    """The key ``seal_api_key`` sealed (in memory only); ``CredentialsUnreadable``,
    ``KeyError`` or ``StorageMisconfigured`` when it does not open."""
    assert box is None or isinstance(box, CredentialBox)
    return str(_box(box).open(sealed, aad=associated_data(tenant_id, row_id, table))["api_key"])


def endpoint_policy(settings: Settings) -> EndpointPolicy:
    """The one guard, with the operator's allow-list and the hosted LLM APIs."""
    return EndpointPolicy.from_entries(settings.allowed_endpoints,
                                       settings.summarizer_public_hosts)


def settings_and_box(runtime_or_settings: Running | Settings
                     ) -> tuple[Settings, CredentialBox | None]:
    """The settings, and the box that seals and opens the tenants' API keys."""
    if isinstance(runtime_or_settings, Settings):
        return runtime_or_settings, CredentialBox(load_server_key(runtime_or_settings))
    return runtime_or_settings.settings, runtime_or_settings.plane.credentials


def _box(box: CredentialBox | None) -> CredentialBox:
    if box is None:
        raise StorageMisconfigured("the server has no key to seal a summariser API key")
    return box


# -- what a compactor run uses ------------------------------------------------------------

class _Unusable:
    """A configured endpoint whose key cannot be opened: every bucket fails (and is retried
    next run) until the tenant configures the summariser again."""

    provider = PROVIDER
    prompt_version = PROMPT_VERSION

    def __init__(self, model: str, code: str) -> None:
        self.model = model
        self.code = code

    def summarize(self, scope: str, scope_ref: str, events: Sequence[EventText]) -> Summary:
        raise SummarizerFailed(self.code)


def build_for_tenant(session: Session, runtime_or_settings: Running | Settings,
                     tenant_id: uuid.UUID, budget: TokenBudget, *,
                     sleep: Callable[[float], None] = time.sleep) -> Summarizer:
    """The tenant's configured endpoint (its budget narrowing ``budget``), else the offline
    extractive summariser."""
    config = repo.get(session, tenant_id)
    if config is None:
        return ExtractiveSummarizer()
    settings, box = settings_and_box(runtime_or_settings)
    budget.narrow(config.token_budget_per_run if config.token_budget_per_run is not None
                  else settings.summarizer_token_budget_per_run)
    api_key: str | None = None
    if config.api_key_encrypted is not None:
        try:
            api_key = _box(box).open(config.api_key_encrypted,
                                     aad=associated_data(tenant_id, config.id))["api_key"]
        except (CredentialsUnreadable, KeyError, StorageMisconfigured):
            log.warning("the summariser key of tenant %s does not open with this server key",
                        tenant_id)
            return _Unusable(config.model, "credentials_unreadable")
    return OpenAICompatibleSummarizer(
        base_url=config.base_url, model=config.model, api_key=api_key,
        policy=endpoint_policy(settings), budget=budget,
        timeout_seconds=config.timeout_ms / 1000, max_retries=config.max_retries,
        max_output_tokens=settings.summarizer_max_output_tokens,
        max_input_chars=settings.summarizer_max_input_chars,
        max_retry_wait=settings.summarizer_max_retry_wait_seconds, sleep=sleep)


# -- the configuration API ----------------------------------------------------------------

def _refuse(code: str) -> NoReturn:
    raise InvalidInput(f"{SENTENCES.get(code, 'the summariser endpoint failed')} ({code}); "
                       "nothing was saved — fix the base_url, model or api_key and retry",
                       problem=code)


def configure(session: Session, runtime_or_settings: Running | Settings, actor: Actor,
              body: SummarizerConfigIn) -> SummarizerConfigOut:
    """Probe the endpoint, then make it the tenant's summariser."""
    settings, box = settings_and_box(runtime_or_settings)
    host = urlsplit(body.base_url).hostname or ""
    key = body.api_key.get_secret_value() if body.api_key is not None else None
    with audited(session, actor, "summarizer_config_write",
                 detail=f"provider={PROVIDER} host={host} model={body.model}"):
        session.commit()  # no transaction may stay open across the probe
        probe = OpenAICompatibleSummarizer(
            base_url=body.base_url, model=body.model, api_key=key,
            policy=endpoint_policy(settings), budget=TokenBudget(),
            timeout_seconds=min(body.timeout_seconds, PROBE_TIMEOUT_CAP), max_retries=0)
        try:
            probe.probe()
        except SummarizerFailed as failed:
            _refuse(failed.code)
        config_id = new_id()
        config = SummarizerConfig(
            id=config_id, tenant_id=actor.tenant_id, provider=PROVIDER,
            base_url=body.base_url, model=body.model,
            api_key_encrypted=(_box(box).seal({"api_key": key},
                                              aad=associated_data(actor.tenant_id, config_id))
                               if key is not None else None),
            timeout_ms=max(1, round(body.timeout_seconds * 1000)),
            max_retries=body.max_retries, token_budget_per_run=body.token_budget_per_run,
            created_at=utcnow())
        begin_write(session)
        repo.replace(session, actor.tenant_id, config)
        audit.record(session, actor, "summarizer_config_write",
                     detail=f"config {config_id}: provider={PROVIDER} host={host} "
                            f"model={body.model} has_api_key={key is not None} "
                            f"timeout_seconds={body.timeout_seconds:g} "
                            f"max_retries={body.max_retries} "
                            f"token_budget_per_run={body.token_budget_per_run}")
        session.commit()
    return _out(config, settings)


def get_config(session: Session, runtime_or_settings: Running | Settings,
               actor: Actor, *, audit_read: bool = True) -> SummarizerConfigOut:
    """The tenant's summariser, without its key; the offline default when none is set."""
    settings, _ = settings_and_box(runtime_or_settings)
    config = repo.get(session, actor.tenant_id)
    session.commit()
    if not audit_read:
        return _out(config, settings)
    begin_write(session)
    audit.record(session, actor, "summarizer_config_read",
                 detail=f"config {config.id}" if config is not None else "default")
    session.commit()
    return _out(config, settings)


def delete_config(session: Session, runtime_or_settings: Running | Settings,
                  actor: Actor) -> SummarizerConfigOut:
    """Back to the offline default; the sealed key goes with the row."""
    settings, _ = settings_and_box(runtime_or_settings)
    with audited(session, actor, "summarizer_config_delete"):
        session.commit()
        begin_write(session)
        removed = repo.remove(session, actor.tenant_id)
        audit.record(session, actor, "summarizer_config_delete",
                     detail=f"config {removed} removed" if removed else "nothing configured")
        session.commit()
    return _out(None, settings)


def _out(config: SummarizerConfig | None, settings: Settings) -> SummarizerConfigOut:
    if config is None:
        return SummarizerConfigOut(
            provider="extractive", base_url=None, model=EXTRACTIVE_MODEL, has_api_key=False,
            timeout_seconds=None, max_retries=None, token_budget_per_run=None,
            prompt_version=EXTRACTIVE_PROMPT, configured_at=None)
    return SummarizerConfigOut(
        provider="openai_compatible", base_url=config.base_url, model=config.model,
        has_api_key=config.api_key_encrypted is not None,
        timeout_seconds=config.timeout_ms / 1000, max_retries=config.max_retries,
        token_budget_per_run=(config.token_budget_per_run
                              if config.token_budget_per_run is not None
                              else settings.summarizer_token_budget_per_run),
        prompt_version=PROMPT_VERSION, configured_at=config.created_at)


def summarizer_for(session: Session, runtime_or_settings: Running | Settings,
                   tenant_id: uuid.UUID, budget: TokenBudget) -> Summarizer:
    """The tenant's configured OpenAI-compatible endpoint, else the offline extractive one.

    The tenant's ``token_budget_per_run`` (or ``MEMPLANE_SUMMARIZER_TOKEN_BUDGET_PER_RUN``)
    narrows ``budget``. Reads one row; sends nothing.
    """
    return build_for_tenant(session, runtime_or_settings, tenant_id, budget)
