"""The model extractor (``model-v1``): the tenant's OpenAI-compatible endpoint (the
summariser's config: its guard, sealed key and token budget) is asked, mem0-style, for the
facts of the new messages *and* what to do with each given what is stored, as JSON. The
answer is validated strictly; anything else (a failed call, a spent budget, an answer that
is not exactly the JSON asked for) is a :class:`ModelUnusable` and the caller falls back to
the built-in extractor, saying so.

Which endpoint serves the ``extraction`` purpose is decided in one place,
:func:`endpoint_for`.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy.orm import Session

from ..settings import Settings
from ..summarizers import BudgetSpent, Running, SummarizerFailed, TokenBudget
from ..summarizers.openai_compat import OpenAICompatibleSummarizer
from ..summarizers.service import build_for_tenant
from .rules import Fact
from .sensitive import redacted

EXTRACTOR = "model-v1"
PURPOSE = "extraction"
MAX_DECISIONS = 50
KEY_PATTERN = r"^[a-z][a-z_]{0,31}(\.[a-z0-9][a-z0-9_-]{0,39})?$"


class Chat(Protocol):
    """What remember needs of an endpoint: its model's name and one completion."""

    model: str

    def complete(self, chat: list[dict[str, str]]) -> tuple[str, int]: ...


class ModelUnusable(Exception):
    """The model gave no usable answer; ``code`` says why (never the remote's words)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class _Unopened:
    """A configured endpoint whose sealed key does not open: every call fails."""

    def __init__(self, model: str, code: str) -> None:
        self.model = model
        self.code = code

    def complete(self, chat: list[dict[str, str]]) -> tuple[str, int]:
        raise SummarizerFailed(self.code)


def endpoint_for(session: Session, runtime_or_settings: Running | Settings,
                 tenant_id: uuid.UUID, scope: str) -> Chat | None:
    """The endpoint that extracts facts for the tenant (purpose ``extraction``), or None for
    the built-in extractor: today the summariser's configured endpoint, with its token
    budget per run as this call's budget."""
    summarizer = build_for_tenant(session, runtime_or_settings, tenant_id, TokenBudget())
    session.rollback()
    if isinstance(summarizer, OpenAICompatibleSummarizer):
        return summarizer
    code = getattr(summarizer, "code", None)
    if isinstance(code, str):  # configured, but its key does not open
        return _Unopened(summarizer.model, code)
    return None


class _Decision(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    event: Literal["ADD", "UPDATE", "DELETE", "NONE"]
    key: str = Field(pattern=KEY_PATTERN)
    value: str | None = Field(None, min_length=1, max_length=500)
    seqs: list[int] = Field(default_factory=list, max_length=100)
    reason: str | None = Field(None, max_length=200)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    decisions: list[_Decision] = Field(max_length=MAX_DECISIONS)


SYSTEM = (
    "You keep a memory of durable facts about one user: preferences, devices and systems "
    "they use, past issues and their resolutions, role, department, employer, ongoing "
    "projects. Given the stored memories (key = value) and new messages, decide for each "
    "fact the user states: ADD (new key), UPDATE (a stored key whose value changed), DELETE "
    "(a stored key the user retracted) or NONE (already stored). Keys are lower case: "
    "'name', 'role', 'department', 'employer', or '<kind>.<slug>' with kind one of "
    "preference, likes, uses, project, issue, resolution, about (e.g. "
    "preference.response_format, uses.slack); reuse a stored key for the same fact. Never "
    "keep passwords, card numbers, account numbers, government ids or secrets. Answer with "
    'JSON only: {"decisions": [{"event": "ADD", "key": "...", "value": "...", '
    '"seqs": [1], "reason": "..."}]}; value is omitted for DELETE.')


def prompt(stored: dict[str, str], messages: Sequence[tuple[int, str, str]]
           ) -> list[dict[str, str]]:
    lines = ["Stored memories:"]
    lines += [f"- {key} = {value}" for key, value in sorted(stored.items())] or ["(none)"]
    lines += ["", "New messages:"]
    lines += [f"[{seq}] {role}: {redacted(content)}" for seq, role, content in messages]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def _json_of(text: str) -> object:
    body = text.strip()
    if body.startswith("```"):  # a fenced answer: the fence is not part of the JSON
        body = body.strip("`").removeprefix("json").strip()
    return json.loads(body)


def ask(endpoint: Chat, stored: dict[str, str], messages: Sequence[tuple[int, str, str]]
        ) -> list[tuple[Fact, str]]:
    """The model's decisions as facts (a DELETE as a retraction, NONE left out) with the
    model's reason; raises :class:`ModelUnusable`."""
    try:
        text, _ = endpoint.complete(prompt(stored, messages))
    except SummarizerFailed as exc:
        raise ModelUnusable(exc.code) from None
    except BudgetSpent:
        raise ModelUnusable("token_budget_spent") from None
    try:
        answer = _Answer.model_validate(_json_of(text))
    except (ValueError, ValidationError, RecursionError):
        raise ModelUnusable("malformed_answer") from None
    known = {seq for seq, _, _ in messages}
    facts: list[tuple[Fact, str]] = []
    for item in answer.decisions:
        # A key is control-plane metadata: no number in it (a phone, an account …).
        if (item.event in ("ADD", "UPDATE") and item.value is None) \
                or not set(item.seqs) <= known or re.search(r"\d{3}", item.key):
            raise ModelUnusable("malformed_answer")
        if item.event == "NONE" and item.value is None:
            continue
        value = None if item.event == "DELETE" else item.value
        kind = item.key.split(".", 1)[0]
        memory_type = "preference" if kind in ("preference", "likes") else "fact"
        label = kind.replace("_", " ").capitalize()
        facts.append((Fact(key=item.key, value=value, label=label,
                           seqs=tuple(item.seqs), memory_type=memory_type),
                      item.reason or ""))
    return facts
