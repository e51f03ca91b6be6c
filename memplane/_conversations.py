"""Conversations in the SDK: the answers' models and the request builders (``Call``s) that
``client.conversations`` sends (``_content_async.py`` and its generated sync twin)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ._base import (
    Call,
    _idempotency,
    _without_none,
    parse_model,
    parse_nothing,
    path_segment,
    query_params,
)
from ._compliance import Job
from ._models import Page, _Model

__all__ = ["ContextItem", "ContextSection", "ContextWindow", "Conversation", "Message",
           "MessageAdded", "SearchedScope"]


class Conversation(_Model):
    """A conversation's state: token usage against its model's limit, whether it needs
    summarising, and its summary's pointer (metadata only)."""

    id: str
    user_id: str | None = None
    agent_id: str | None = None
    model: str
    encoding: str
    context_window_limit: int
    context_window_tokens: int
    needs_summarization: bool
    summarize_at_tokens: int
    summary_pointer_id: str | None = None
    summarized_through: int
    summary_tokens: int
    message_count: int
    summary_job_id: str | None = None
    created_at: datetime
    updated_at: datetime


class MessageAdded(_Model):
    """A stored message's seq and token cost, with the conversation's new state."""

    seq: int
    tokens: int
    pointer_id: str
    user_id: str | None = None
    conversation: Conversation


class Message(_Model):
    """One message, read from the bucket and verified; ``summarized``: the summary covers
    it."""

    seq: int
    role: str
    content: str
    tokens: int
    pointer_id: str
    created_at: datetime
    summarized: bool


class ContextSection(_Model):
    role: str
    kind: str
    content: str
    tokens: int


class ContextItem(_Model):
    """What became of one candidate: ``status`` included, summarized or dropped; ``reason``
    budget, compressed, superseded_by_summary, … ."""

    kind: str
    id: str
    status: str
    reason: str | None = None
    tokens: int


class SearchedScope(_Model):
    """A scope whose memory was a candidate: ``reason`` requested, data_subject, agent or
    team."""

    scope: str
    scope_ref: str
    reason: str
    user_id: str | None = None  # only this subject's memories were searched there


class ContextWindow(_Model):
    """The assembled window (``sections``, in order) and the report of every candidate."""

    sections: list[ContextSection]
    total_tokens: int
    token_budget: int
    encoding: str
    tokens_by_kind: dict[str, int]
    report: list[ContextItem]
    searched_scopes: list[SearchedScope] = []

    def messages(self) -> list[dict[str, str]]:
        """The sections as chat messages (``[{"role", "content"}]``) for a model call."""
        return [{"role": s.role, "content": s.content} for s in self.sections]


def _conv(conversation_id: str) -> str:
    return f"/v1/conversations/{path_segment(str(conversation_id), name='conversation_id')}"


def add_message(conversation_id: str, *, role: str, content: str, user_id: str | None,
                agent_id: str | None, model: str | None, context_window_limit: int | None,
                idempotency_key: str | None) -> Call[MessageAdded]:
    fields = {"role": role, "content": content, "user_id": user_id, "agent_id": agent_id,
              "model": model, "context_window_limit": context_window_limit}
    return Call("POST", f"{_conv(conversation_id)}/messages", parse_model(MessageAdded),
                json=_without_none(fields), headers=_idempotency(idempotency_key))


def get(conversation_id: str) -> Call[Conversation]:
    return Call("GET", _conv(conversation_id), parse_model(Conversation))


def messages(conversation_id: str, *, after: int | None, limit: int | None,
             cursor: str | None) -> Call[Page[Message]]:
    return Call("GET", f"{_conv(conversation_id)}/messages", parse_model(Page[Message]),
                params=query_params(after=after, limit=limit, cursor=cursor))


def context(conversation_id: str, *, system_prompt: str, message: str, token_budget: int,
            model: str | None, memory_scopes: Sequence[tuple[str, str]] | None,
            memory_limit: int | None) -> Call[ContextWindow]:
    body: dict[str, Any] = {"system_prompt": system_prompt, "message": message,
                            "token_budget": token_budget, "model": model,
                            "memory_limit": memory_limit}
    if memory_scopes is not None:  # [] names none; omitted: the conversation's own
        body["memory_scopes"] = [{"scope": s, "scope_ref": r} for s, r in memory_scopes]
    return Call("POST", f"{_conv(conversation_id)}/context", parse_model(ContextWindow),
                json=_without_none(body))


def summarize(conversation_id: str) -> Call[Job]:
    return Call("POST", f"{_conv(conversation_id)}/summarize", parse_model(Job))


def delete(conversation_id: str) -> Call[None]:
    return Call("DELETE", _conv(conversation_id), parse_nothing)
