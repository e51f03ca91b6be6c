"""What a tenant admin sends to route its summaries to its own model, and what it gets back.

The API key is a ``SecretStr``: sealed before it is stored, never in an answer, a log line
or an audit row; answers only say ``has_api_key``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from urllib.parse import urlsplit

import httpx
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    field_validator,
    model_validator,
)

from ..addresses import Scope

BaseUrl = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                           max_length=1024)]
ModelName = Annotated[str, StringConstraints(
    strip_whitespace=True, min_length=1, max_length=128, pattern=r"^[\x21-\x7e]+$")]


class SummarizerConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "base_url": "https://api.openai.com/v1", "model": "gpt-4o-mini",
        "api_key": "sk-...", "timeout_seconds": 30, "max_retries": 2,
        "token_budget_per_run": 200000}]})

    base_url: BaseUrl = Field(description="The API root; '/chat/completions' is appended.",
                              json_schema_extra={"pattern": r"^https?://[^/?#@\s]+[^?#\s]*$"})
    model: ModelName = Field(description="The model name the endpoint expects.")
    api_key: SecretStr | None = Field(
        None, description="Sent as 'Authorization: Bearer <key>'; stored sealed, never shown.")
    timeout_seconds: float = Field(30.0, gt=0, le=300,
                                   description="Per attempt: connect, send, each read.")
    max_retries: int = Field(2, ge=0, le=10,
                             description="Retries after a timeout, a 5xx or a 429.")
    token_budget_per_run: int | None = Field(
        None, ge=100, le=10**12, description="Tokens one compactor run may spend; default: "
        "the server's MEMPLANE_SUMMARIZER_TOKEN_BUDGET_PER_RUN.")

    @field_validator("base_url")
    @classmethod
    def _plain_url(cls, value: str) -> str:
        try:
            parts = urlsplit(value)
            _ = parts.port  # a port out of range or not a number
            httpx.URL(value)
        except (ValueError, httpx.InvalidURL):
            raise ValueError("base_url is not a valid URL; give one like "
                             "'https://api.openai.com/v1'") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be an http:// or https:// URL with a host, like "
                             "'https://api.openai.com/v1'")
        if parts.username is not None or parts.password is not None:
            raise ValueError("base_url must not carry a user name or password; send the key "
                             "as api_key")
        if parts.query or parts.fragment:
            raise ValueError("base_url must not carry a query or a fragment; send the key as "
                             "api_key")
        return value.rstrip("/")

    @field_validator("api_key")
    @classmethod
    def _usable_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        raw = value.get_secret_value()
        if not raw or len(raw) > 4096 or any(c.isspace() or not c.isprintable() for c in raw):
            raise ValueError("api_key must be 1-4096 printable characters without spaces")
        return value


class SummarizerConfigOut(BaseModel):
    provider: Literal["openai_compatible", "extractive"] = Field(
        description="'extractive' is the built-in offline summariser (no endpoint).")
    base_url: str | None = Field(description="The endpoint's API root; null offline.")
    model: str = Field(description="The model summaries are written with.")
    has_api_key: bool = Field(description="Whether a key is stored; the key is never shown.")
    timeout_seconds: float | None = Field(description="Per attempt; null offline.")
    max_retries: int | None = Field(description="Retries after a timeout, a 5xx or a 429; "
                                    "null offline.")
    token_budget_per_run: int | None = Field(
        description="Tokens one run may spend (the tenant's, else the server's default); "
        "null for the offline summariser, which spends none.")
    prompt_version: str = Field(description="The version of the prompt (or extraction rules) "
                                "recorded on every compactor entry it writes.")
    configured_at: datetime | None = Field(description="When the endpoint was configured; "
                                           "null for the offline default.")


# -- model routing (``PUT|GET /v1/model-routes``) -----------------------------------------

Purpose = Literal["compaction", "conversation_summary", "extraction", "embedding"]
MAX_ROUTES = 50


class RouteIn(SummarizerConfigIn):
    """One rule: an OpenAI-compatible endpoint and model (validated as the summariser's)
    for one purpose, and optionally one scope."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "purpose": "compaction", "scope": "entity", "base_url": "https://api.openai.com/v1",
        "model": "gpt-4o", "api_key": "sk-...", "token_budget_per_run": 500000}]})

    purpose: Purpose = Field(description="What the rule routes: 'compaction' (the "
                             "compactor's summaries), 'conversation_summary', 'extraction' "
                             "(facts remembered from conversations) or 'embedding' (not "
                             "routed yet: refused).")
    scope: Scope | None = Field(None, description="Only calls about this scope (e.g. the "
                                "bucket's scope for 'compaction'); omitted: every scope. A "
                                "rule with a scope wins over one without.")


class RoutesIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"rules": [
        {"purpose": "compaction", "base_url": "https://api.openai.com/v1",
         "model": "gpt-4o-mini", "api_key": "sk-...", "token_budget_per_run": 200000},
        {"purpose": "compaction", "scope": "entity", "base_url": "https://api.openai.com/v1",
         "model": "gpt-4o", "api_key": "sk-...", "token_budget_per_run": 500000}]}]})

    rules: list[RouteIn] = Field(max_length=MAX_ROUTES, description="The tenant's rules, "
                                 "replacing the ones before; [] removes them all. At most "
                                 "one rule per (purpose, scope).")

    @model_validator(mode="after")
    def _one_rule_each(self) -> RoutesIn:
        seen: set[tuple[str, str | None]] = set()
        for n, rule in enumerate(self.rules):
            if rule.purpose == "embedding":
                raise ValueError(f"rule {n}: the 'embedding' purpose is not routed yet (one "
                                 "search index needs one embedder): set the tenant's "
                                 "embedder with PUT /v1/embedder/config")
            key = (rule.purpose, rule.scope.canonical if rule.scope else None)
            if key in seen:
                raise ValueError(f"rule {n}: a second rule for purpose '{rule.purpose}' and "
                                 f"scope '{key[1] or 'any'}'; keep one rule per purpose and "
                                 "scope")
            seen.add(key)
        return self


class RouteOut(BaseModel):
    purpose: str = Field(description="What the rule routes.")
    scope: str | None = Field(description="The scope it is limited to; null: every scope.")
    base_url: str = Field(description="The endpoint's API root.")
    model: str = Field(description="The model called.")
    has_api_key: bool = Field(description="Whether a key is stored; the key is never shown.")
    timeout_seconds: float = Field(description="Per attempt.")
    max_retries: int = Field(description="Retries after a timeout, a 5xx or a 429.")
    token_budget_per_run: int | None = Field(
        description="Tokens one run (a compaction run, a conversation summary, an "
        "extraction) may spend through this rule; null: the server's default.")


class RoutesOut(BaseModel):
    rules: list[RouteOut] = Field(description="The tenant's rules, in the order given.")
    fallback: SummarizerConfigOut = Field(description="What calls no rule matches use: the "
                                          "tenant's summariser (PUT /v1/summarizer/config), "
                                          "else the offline one.")
