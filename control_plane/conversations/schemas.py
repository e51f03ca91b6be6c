from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ..addresses import Ref, Scope
from ..db.models import Conversation

Role = Literal["system", "user", "assistant", "tool"]
Model = Annotated[str, StringConstraints(min_length=1, max_length=128,
                                         pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")]
MAX_CONTENT_CHARS = 1_000_000


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"role": "user", "content": "Can you move my flight to Friday?", "user_id": "u-42",
         "model": "gpt-4o"}]})

    role: Role = Field(description="Who spoke: system, user, assistant or tool.")
    content: str = Field(max_length=MAX_CONTENT_CHARS, description="The message text; "
                         "stored only in the tenant's bucket.")
    user_id: Ref | None = Field(None, description="The conversation's data subject: exports "
                                "and erasures of this user include its messages and summary. "
                                "Fixed by the first message that names one.")
    agent_id: Ref | None = Field(None, description="The agent taking part.")
    model: Model | None = Field(None, description="The model whose tokenizer counts the "
                                "messages; fixed by the conversation's first message "
                                "(default gpt-4o).")
    context_window_limit: int | None = Field(None, ge=256, le=10_000_000, description="The "
                                             "model's context window in tokens; default: the "
                                             "model's known limit, else 128000.")
    remember: bool = Field(False, description="After storing the message, queue a job that "
                           "runs remember (POST /v1/remember) over the conversation's recent "
                           "messages for its user_id; the answer does not wait.")


class ConversationOut(BaseModel):
    id: str = Field(description="The conversation id the caller chose.")
    user_id: str | None = Field(description="Its data subject (exports and erasures of this "
                                "user include its messages and summary).")
    agent_id: str | None = Field(description="The agent taking part.")
    model: str = Field(description="The model whose tokenizer counts its tokens.")
    encoding: str = Field(description="The tokenizer encoding counting its tokens.")
    context_window_limit: int = Field(description="The model's context window in tokens.")
    context_window_tokens: int = Field(description="Tokens of the messages the summary does "
                                       "not cover yet (each message: content + 4).")
    needs_summarization: bool = Field(description="context_window_tokens reached "
                                      "summarize_at_tokens; a summarisation job is queued.")
    summarize_at_tokens: int = Field(description="needs_summarization turns on at this many "
                                     "context_window_tokens (MEMPLANE_SUMMARIZE_AT × limit).")
    summary_pointer_id: uuid.UUID | None = Field(description="The summary's keyed memory "
                                                 "(key 'summary', memory type summary).")
    summarized_through: int = Field(description="The last message seq the summary covers; 0: "
                                    "no summary.")
    summary_tokens: int = Field(description="What the summary costs in a window.")
    message_count: int = Field(description="Messages stored.")
    summary_job_id: uuid.UUID | None = Field(description="The summarisation job queued or "
                                             "running, if any (GET /v1/jobs/{id}).")
    created_at: datetime = Field(description="Its first message (UTC).")
    updated_at: datetime = Field(description="Its last change (UTC).")

    @classmethod
    def of(cls, row: Conversation, encoding: str, threshold: float) -> ConversationOut:
        return cls(id=row.conversation_id, user_id=row.subject_user_id, agent_id=row.agent_id,
                   model=row.model, encoding=encoding,
                   context_window_limit=row.context_window_limit,
                   context_window_tokens=row.context_window_tokens,
                   needs_summarization=row.needs_summarization,
                   summarize_at_tokens=threshold_tokens(row.context_window_limit, threshold),
                   summary_pointer_id=row.summary_pointer_id,
                   summarized_through=row.summarized_through, summary_tokens=row.summary_tokens,
                   message_count=row.message_count, summary_job_id=row.summary_job_id,
                   created_at=row.created_at, updated_at=row.updated_at)


def threshold_tokens(limit: int, share: float) -> int:
    return max(1, int(limit * share))


class MessageAdded(BaseModel):
    seq: int = Field(description="The message's place in the conversation, from 1.")
    tokens: int = Field(description="What the message costs in the window: content tokens "
                        "+ 4 (chat framing and role).")
    pointer_id: uuid.UUID = Field(description="The keyed memory holding it "
                                  "(scope conversation, key m/<seq, 8 digits>).")
    user_id: str | None = Field(description="The conversation's data subject.")
    conversation: ConversationOut = Field(description="The conversation's state after it.")
    remember_job_id: uuid.UUID | None = Field(None, description="The remember job queued "
                                              "for it (remember true and the conversation "
                                              "has a user_id), else null.")


class MessageOut(BaseModel):
    seq: int = Field(description="Its place in the conversation, from 1.")
    role: Role = Field(description="system, user, assistant or tool.")
    content: str = Field(description="The text, read from the bucket and verified.")
    tokens: int = Field(description="What it costs in a window (content + 4).")
    pointer_id: uuid.UUID = Field(description="The keyed memory holding it.")
    created_at: datetime = Field(description="When it was added (UTC).")
    summarized: bool = Field(description="Covered by the conversation's summary.")


class MessagePage(BaseModel):
    items: list[MessageOut] = Field(description="Messages in seq order.")
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null at "
                                    "the end.")


class MemoryScope(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: Scope = Field(description="user, entity, project, team, … .")
    scope_ref: Ref = Field(description="Which one ('-' for tenant).")


class ContextIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"system_prompt": "You are a travel assistant.", "message": "And the hotel?",
         "token_budget": 4000, "memory_scopes": [{"scope": "user", "scope_ref": "u-42"}]}]})

    system_prompt: str = Field(max_length=MAX_CONTENT_CHARS, description="Always included, "
                               "first.")
    message: str = Field(max_length=MAX_CONTENT_CHARS, description="The current message "
                         "(always included, last).")
    token_budget: int = Field(ge=1, le=10_000_000, description="The window's size in "
                              "tokens; total_tokens never exceeds it.")
    model: Model | None = Field(None, description="Count with this model's tokenizer; "
                                "default: the conversation's model.")
    memory_scopes: list[MemoryScope] | None = Field(
        None, max_length=20, description="Scopes whose memories, entries and uncompressed "
        "events may fill the window. Omitted: the conversation's own — its data subject "
        "(user scope, and that user's memories in the other scopes holding some), its agent "
        "(agent scope: memories and knowledge) and the agent's teams, each only if the key "
        "may see it. []: none.")
    memory_limit: int = Field(10, ge=0, le=100, description="At most this many items per "
                              "kind (memories, entries, events).")


class Section(BaseModel):
    role: Role = Field(description="The chat role to send it with.")
    kind: Literal["system_prompt", "memory", "older_context", "message",
                  "current_message"] = Field(description="What it holds.")
    content: str = Field(description="The text.")
    tokens: int = Field(description="Its cost: content tokens + 4.")


class ReportItem(BaseModel):
    kind: Literal["system_prompt", "current_message", "memory", "entry", "event",
                  "message", "summary"] = Field(description="What the candidate is.")
    id: str = Field(description="The pointer id, event id or message seq.")
    status: Literal["included", "summarized", "dropped"] = Field(
        description="included; summarized (the summary stands for it); dropped.")
    reason: str | None = Field(None, description="Why not included: budget, compressed, "
                               "superseded_by_summary, unreadable; truncated_to_budget for a "
                               "summary cut to fit.")
    tokens: int = Field(description="What it costs (or would have) in the window.")


class SearchedScope(BaseModel):
    scope: str = Field(description="The scope searched (user, agent, team, …).")
    scope_ref: str = Field(description="Which one.")
    reason: Literal["requested", "data_subject", "agent", "team"] = Field(
        description="requested: named in memory_scopes; data_subject: the conversation's "
        "user; agent: the conversation's agent (its memories and knowledge); team: a team "
        "the agent belongs to.")
    user_id: str | None = Field(None, description="Set: only the memories about this data "
                                "subject were searched in the scope (the conversation's "
                                "user's memories outside the user scope); null: the whole "
                                "scope, with its entries and events.")


class ContextOut(BaseModel):
    sections: list[Section] = Field(description="The window, in the order to send it.")
    total_tokens: int = Field(description="The sections' tokens; at most token_budget.")
    token_budget: int = Field(description="The budget asked for.")
    encoding: str = Field(description="The tokenizer encoding that counted.")
    tokens_by_kind: dict[str, int] = Field(description="Tokens per section kind.")
    report: list[ReportItem] = Field(description="Every candidate, in the order considered, "
                                     "with what became of it.")
    searched_scopes: list[SearchedScope] = Field(description="The scopes whose memories, "
                                                 "entries and events were candidates.")
