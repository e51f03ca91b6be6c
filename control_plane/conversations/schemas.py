from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ..db.models import Conversation
from ..memories.addresses import Scope
from ..memories.schemas import Ref

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


class ConversationOut(BaseModel):
    id: str = Field(description="The conversation id the caller chose.")
    user_id: str | None
    agent_id: str | None
    model: str
    encoding: str = Field(description="The tokenizer encoding counting its tokens.")
    context_window_limit: int
    context_window_tokens: int = Field(description="Tokens of the messages the summary does "
                                       "not cover yet (each message: content + 4).")
    needs_summarization: bool
    summarize_at_tokens: int = Field(description="needs_summarization turns on at this many "
                                     "context_window_tokens (MEMPLANE_SUMMARIZE_AT × limit).")
    summary_pointer_id: uuid.UUID | None
    summarized_through: int = Field(description="The last message seq the summary covers; 0: "
                                    "no summary.")
    summary_tokens: int
    message_count: int
    summary_job_id: uuid.UUID | None
    created_at: datetime
    updated_at: datetime

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
    conversation: ConversationOut


class MessageOut(BaseModel):
    seq: int
    role: Role
    content: str
    tokens: int
    pointer_id: uuid.UUID
    created_at: datetime
    summarized: bool = Field(description="Covered by the conversation's summary.")


class MessagePage(BaseModel):
    items: list[MessageOut]
    next_cursor: str | None


class MemoryScope(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: Scope
    scope_ref: Ref


class ContextIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"system_prompt": "You are a travel assistant.", "message": "And the hotel?",
         "token_budget": 4000, "memory_scopes": [{"scope": "user", "scope_ref": "u-42"}]}]})

    system_prompt: str = Field(max_length=MAX_CONTENT_CHARS)
    message: str = Field(max_length=MAX_CONTENT_CHARS, description="The current message "
                         "(always included, last).")
    token_budget: int = Field(ge=1, le=10_000_000)
    model: Model | None = Field(None, description="Count with this model's tokenizer; "
                                "default: the conversation's model.")
    memory_scopes: list[MemoryScope] = Field(default_factory=list, max_length=20,
                                             description="Scopes whose memories, entries "
                                             "and uncompressed events may fill the window.")
    memory_limit: int = Field(10, ge=0, le=100, description="At most this many items per "
                              "kind (memories, entries, events).")


class Section(BaseModel):
    role: Role
    kind: Literal["system_prompt", "memory", "older_context", "message", "current_message"]
    content: str
    tokens: int


class ReportItem(BaseModel):
    kind: Literal["system_prompt", "current_message", "memory", "entry", "event",
                  "message", "summary"]
    id: str = Field(description="The pointer id, event id or message seq.")
    status: Literal["included", "summarized", "dropped"]
    reason: str | None = Field(None, description="Why not included: budget, compressed, "
                               "superseded_by_summary, unreadable; truncated_to_budget for a "
                               "summary cut to fit.")
    tokens: int


class ContextOut(BaseModel):
    sections: list[Section]
    total_tokens: int
    token_budget: int
    encoding: str
    tokens_by_kind: dict[str, int]
    report: list[ReportItem]
