"""Request builders and models for model routing (``client.model_routes``) and for writing
a compactor entry again (``client.compactor.resummarize``).

Like ``_layer_calls.py`` they only describe an exchange (a ``Call``); the sync and async
clients send them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from ._base import Call, _without_none, parse_model
from ._models import SummarizerConfig, _Model


class ModelRoute(_Model):
    """One rule: calls for ``purpose`` (``compaction``, ``conversation_summary``,
    ``extraction``), of ``scope`` when set, go to this endpoint and model. The API key is
    never returned: ``has_api_key`` says whether one is stored."""

    purpose: str
    scope: str | None = None
    base_url: str
    model: str
    has_api_key: bool = False
    timeout_seconds: float
    max_retries: int
    token_budget_per_run: int | None = None


class ModelRoutes(_Model):
    """The tenant's rules, in order, and what calls no rule matches use."""

    rules: list[ModelRoute] = Field(default_factory=list)
    fallback: SummarizerConfig


class Resummarized(_Model):
    """A compactor entry written again: its new version and the summariser of each."""

    entry_id: str
    version: int
    event_count: int
    provider: str
    model: str
    prompt_version: str
    previous_provider: str
    previous_model: str
    previous_prompt_version: str
    decisions_kept: int


def model_routes_get() -> Call[ModelRoutes]:
    return Call("GET", "/v1/model-routes", parse_model(ModelRoutes))


def model_routes_set(rules: Sequence[Mapping[str, Any]]) -> Call[ModelRoutes]:
    return Call("PUT", "/v1/model-routes", parse_model(ModelRoutes),
                json={"rules": [_without_none(dict(rule)) for rule in rules]})


def compactor_resummarize(entry_id: str) -> Call[Resummarized]:
    return Call("POST", "/v1/compactor/resummarize", parse_model(Resummarized),
                json={"entry_id": str(entry_id)})
