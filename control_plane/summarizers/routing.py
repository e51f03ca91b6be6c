"""Model routing: a tenant's rules sending each purpose of a model call — ``compaction``,
``conversation_summary``, ``extraction`` (``embedding`` is refused for now: one search index
needs one embedder) — and optionally one scope to an OpenAI-compatible endpoint and model,
with a token budget per rule.

``PUT /v1/model-routes`` replaces the tenant's rules (admin): every rule's endpoint passes
the one endpoint guard and answers a one-token probe (as ``PUT /v1/summarizer/config``'s
does, no transaction open meanwhile) before anything is saved; each API key is sealed with
the server key, bound to its row. ``GET`` shows them without keys.

Which rule a call uses (:func:`route_for`): of the rules for its purpose, the one for its
scope, else the one for every scope, else the tenant's summariser config (the fallback),
else none (the offline summariser or extractor). The key is opened in memory only; it is
never answered, logged or audited — audit rows name the purpose, scope, host and model.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from ..addresses import Scope
from ..audit import service as audit
from ..audit.service import audited
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import ModelRoute, Tenant
from ..errors import InvalidInput, StorageMisconfigured
from ..identity import Actor
from ..plane.credentials import CredentialsUnreadable
from ..settings import Settings
from . import SENTENCES, EventText, Running, Summarizer, SummarizerFailed, Summary, TokenBudget
from . import repository as summarizer_repo
from .openai_compat import PROVIDER, OpenAICompatibleSummarizer
from .prompt import PROMPT_VERSION
from .schemas import RouteIn, RouteOut, RoutesIn, RoutesOut
from .service import (
    PROBE_TIMEOUT_CAP,
    endpoint_policy,
    get_config,
    open_api_key,
    seal_api_key,
    settings_and_box,
    summarizer_for,
)

log = logging.getLogger(__name__)

TABLE = "model_routes"
PURPOSES = ("compaction", "conversation_summary", "extraction")


@dataclass(frozen=True)
class Route:
    """Where one call goes: the endpoint, the model, the API key (opened, in memory only;
    never log or store it), the token budget of one run, and whence the route came —
    ``rule`` (a model route, ``rule_id``) or ``summarizer_config`` (the fallback).
    ``problem`` is set (``credentials_unreadable``) when the stored key does not open with
    this server's key: every call through the route should fail with it."""

    purpose: str
    scope: str | None
    base_url: str
    model: str
    api_key: str | None = field(repr=False)
    token_budget: int | None
    timeout_seconds: float
    max_retries: int
    source: str
    rule_id: uuid.UUID | None = None
    problem: str | None = None


def _rules(session: Session, tenant_id: uuid.UUID,
           purpose: str | None = None) -> list[ModelRoute]:
    query = select(ModelRoute).where(ModelRoute.tenant_id == tenant_id)
    if purpose is not None:
        query = query.where(ModelRoute.purpose == purpose)
    return list(session.scalars(query.order_by(ModelRoute.position)))


def _canonical(scope: str | None) -> str | None:
    """``institutional`` is stored as ``tenant``, as everywhere else."""
    if scope is None:
        return None
    try:
        return Scope(scope.lower()).canonical
    except ValueError:
        return scope.lower()


def _pick(rules: Sequence[ModelRoute], scope: str | None) -> ModelRoute | None:
    """The most specific rule: the one for ``scope``, else the one for every scope."""
    for rule in rules:
        if scope is not None and rule.scope_type == scope:
            return rule
    return next((rule for rule in rules if rule.scope_type is None), None)


def route_for(session: Session, runtime_or_settings: Running | Settings, tenant_id: uuid.UUID,
              purpose: str, scope: str | None = None, *,
              fallback: bool = True) -> Route | None:
    """Where a ``purpose`` call about ``scope`` goes for the tenant: the most specific rule,
    else (with ``fallback``) the tenant's summariser config, else None (offline). Reads rows
    and opens a key; sends nothing. The public entry point for every model-calling feature
    (``extraction`` included)."""
    settings, box = settings_and_box(runtime_or_settings)
    rule = _pick(_rules(session, tenant_id, purpose), _canonical(scope))
    if rule is not None:
        key, problem = _open(box, rule.api_key_encrypted, tenant_id, rule.id)
        return Route(purpose, rule.scope_type, rule.base_url, rule.model, key,
                     rule.token_budget_per_run if rule.token_budget_per_run is not None
                     else settings.summarizer_token_budget_per_run,
                     rule.timeout_ms / 1000, rule.max_retries, "rule", rule.id, problem)
    if not fallback:
        return None
    config = summarizer_repo.get(session, tenant_id)
    if config is None:
        return None
    key, problem = _open(box, config.api_key_encrypted, tenant_id, config.id,
                         table="summarizer_configs")
    return Route(purpose, None, config.base_url, config.model, key,
                 config.token_budget_per_run if config.token_budget_per_run is not None
                 else settings.summarizer_token_budget_per_run,
                 config.timeout_ms / 1000, config.max_retries, "summarizer_config", None,
                 problem)


def _open(box: object, sealed: bytes | None, tenant_id: uuid.UUID, row_id: uuid.UUID,
          table: str = TABLE) -> tuple[str | None, str | None]:
    if sealed is None:
        return None, None
    try:
        return open_api_key(box, sealed, tenant_id, row_id, table=table), None
    except (CredentialsUnreadable, KeyError, StorageMisconfigured):
        log.warning("a model route key of tenant %s does not open with this server key",
                    tenant_id)
        return None, "credentials_unreadable"


# -- summarisers built from routes --------------------------------------------------------

class _Failing:
    provider = PROVIDER
    prompt_version = PROMPT_VERSION

    def __init__(self, model: str, code: str) -> None:
        self.model, self.code = model, code

    def summarize(self, scope: str, scope_ref: str, events: Sequence[EventText]) -> Summary:
        raise SummarizerFailed(self.code)


def summarizer_of(route: Route, settings: Settings, budget: TokenBudget) -> Summarizer:
    """The summariser a route calls, its token budget narrowing ``budget``."""
    if route.problem is not None:
        return _Failing(route.model, route.problem)
    budget.narrow(route.token_budget)
    return OpenAICompatibleSummarizer(
        base_url=route.base_url, model=route.model, api_key=route.api_key,
        policy=endpoint_policy(settings), budget=budget,
        timeout_seconds=route.timeout_seconds, max_retries=route.max_retries,
        max_output_tokens=settings.summarizer_max_output_tokens,
        max_input_chars=settings.summarizer_max_input_chars,
        max_retry_wait=settings.summarizer_max_retry_wait_seconds)


def summarizer_for_purpose(session: Session, runtime_or_settings: Running | Settings,
                           tenant_id: uuid.UUID, purpose: str, budget: TokenBudget,
                           scope: str | None = None) -> Summarizer:
    """The summariser for one ``purpose`` call about ``scope``: the matching rule's, else
    the tenant's summariser (``summarizer_for``: its config, else offline)."""
    settings, _ = settings_and_box(runtime_or_settings)
    route = route_for(session, runtime_or_settings, tenant_id, purpose, scope, fallback=False)
    if route is None:
        return summarizer_for(session, runtime_or_settings, tenant_id, budget)
    return summarizer_of(route, settings, budget)


class ScopedSummarizer:
    """A run's summariser routed by each bucket's scope (the compactor's): the rule for the
    scope, else the purpose's rule for every scope, else the fallback. Each rule's
    summariser keeps a budget of its own (its ``token_budget_per_run``), built once."""

    def __init__(self, by_scope: dict[str, Summarizer], default: Summarizer) -> None:
        self.by_scope, self.default = by_scope, default
        self.provider, self.model = default.provider, default.model
        self.prompt_version = default.prompt_version

    def summarize(self, scope: str, scope_ref: str, events: Sequence[EventText]) -> Summary:
        chosen = self.by_scope.get(scope, self.default)
        return chosen.summarize(scope, scope_ref, events)


def routed_summarizer(session: Session, runtime_or_settings: Running | Settings,
                      tenant_id: uuid.UUID, purpose: str) -> Summarizer:
    """The summariser of a run of ``purpose`` calls across scopes (a compaction run)."""
    settings, _ = settings_and_box(runtime_or_settings)
    rules = _rules(session, tenant_id, purpose)
    general = _pick(rules, None)
    default = (summarizer_for_purpose(session, runtime_or_settings, tenant_id, purpose,
                                      TokenBudget())
               if general is not None
               else summarizer_for(session, runtime_or_settings, tenant_id, TokenBudget()))
    if all(rule.scope_type is None for rule in rules):
        return default
    by_scope: dict[str, Summarizer] = {}
    for rule in rules:
        if rule.scope_type is not None:
            route = route_for(session, runtime_or_settings, tenant_id, purpose,
                              rule.scope_type, fallback=False)
            assert route is not None
            by_scope[rule.scope_type] = summarizer_of(route, settings, TokenBudget())
    return ScopedSummarizer(by_scope, default)


# -- the routes API -------------------------------------------------------------------------

def _describe(rule: RouteIn | ModelRoute) -> str:
    scope = (rule.scope.canonical if isinstance(rule, RouteIn) and rule.scope
             else getattr(rule, "scope_type", None))
    return f"{rule.purpose}/{scope or '*'}"


def put_routes(session: Session, runtime_or_settings: Running | Settings, actor: Actor,
               body: RoutesIn) -> RoutesOut:
    """Probe every rule's endpoint, then make ``body.rules`` the tenant's rules."""
    settings, box = settings_and_box(runtime_or_settings)
    with audited(session, actor, "model_routes_write", detail=f"{len(body.rules)} rules"):
        session.commit()  # no transaction may stay open across the probes
        for n, rule in enumerate(body.rules):
            key = rule.api_key.get_secret_value() if rule.api_key is not None else None
            probe = OpenAICompatibleSummarizer(
                base_url=rule.base_url, model=rule.model, api_key=key,
                policy=endpoint_policy(settings), budget=TokenBudget(),
                timeout_seconds=min(rule.timeout_seconds, PROBE_TIMEOUT_CAP), max_retries=0)
            try:
                probe.probe()
            except SummarizerFailed as failed:
                raise InvalidInput(
                    f"rule {n} ({_describe(rule)}): "
                    f"{SENTENCES.get(failed.code, 'the endpoint failed')} ({failed.code}); "
                    "nothing was saved — fix its base_url, model or api_key and retry",
                    problem=failed.code) from None
        begin_write(session)
        session.scalar(select(Tenant.id).where(Tenant.id == actor.tenant_id).with_for_update())
        session.execute(delete(ModelRoute).where(ModelRoute.tenant_id == actor.tenant_id))
        now, lines = utcnow(), []
        for n, rule in enumerate(body.rules):
            row_id = new_id()
            key = rule.api_key.get_secret_value() if rule.api_key is not None else None
            session.add(ModelRoute(
                id=row_id, tenant_id=actor.tenant_id, position=n, purpose=rule.purpose,
                scope_type=rule.scope.canonical if rule.scope else None,
                base_url=rule.base_url, model=rule.model,
                api_key_encrypted=(seal_api_key(box, key, actor.tenant_id, row_id, table=TABLE)
                                   if key is not None else None),
                timeout_ms=max(1, round(rule.timeout_seconds * 1000)),
                max_retries=rule.max_retries, token_budget_per_run=rule.token_budget_per_run,
                created_at=now))
            lines.append(f"{_describe(rule)} host={urlsplit(rule.base_url).hostname} "
                         f"model={rule.model} has_api_key={key is not None} "
                         f"token_budget_per_run={rule.token_budget_per_run}")
        session.flush()
        audit.record(session, actor, "model_routes_write",
                     detail=f"{len(body.rules)} rules" + "".join(f"; {x}" for x in lines))
        session.commit()
    return get_routes(session, runtime_or_settings, actor, audit_read=False)


def get_routes(session: Session, runtime_or_settings: Running | Settings, actor: Actor, *,
               audit_read: bool = True) -> RoutesOut:
    """The tenant's rules without their keys, and the fallback."""
    settings, _ = settings_and_box(runtime_or_settings)
    rules = _rules(session, actor.tenant_id)
    session.commit()
    if audit_read:
        begin_write(session)
        audit.record(session, actor, "model_routes_read", detail=f"{len(rules)} rules")
        session.commit()
    return RoutesOut(
        rules=[RouteOut(purpose=r.purpose, scope=r.scope_type, base_url=r.base_url,
                        model=r.model, has_api_key=r.api_key_encrypted is not None,
                        timeout_seconds=r.timeout_ms / 1000, max_retries=r.max_retries,
                        token_budget_per_run=r.token_budget_per_run) for r in rules],
        fallback=get_config(session, runtime_or_settings, actor, audit_read=False))
