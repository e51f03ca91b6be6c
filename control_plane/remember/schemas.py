from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..addresses import Ref, Scope

MAX_MESSAGES = 100
MAX_MESSAGE_CHARS = 20_000

Event = Literal["ADD", "UPDATE", "DELETE", "NONE"]


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "tool"] = Field(
        description="Who spoke; facts are taken from the user's messages only.")
    content: str = Field(max_length=MAX_MESSAGE_CHARS, description="The message text; read, "
                         "never stored as is (only the facts extracted from it are).")


class RememberIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"messages": [{"role": "user", "content": "I prefer responses in bullet points."}],
         "user_id": "u-42", "agent_id": "support-bot"}]})

    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_MESSAGES, description=(
        f"The messages to remember from, oldest first (1 to {MAX_MESSAGES})."))
    user_id: Ref = Field(description="The data subject the facts are about: every memory "
                         "written carries it, so exports and erasures of this user include "
                         "them.")
    agent_id: Ref | None = Field(None, description="The agent writing them (an agent key "
                                 "fills in its own).")
    conversation_id: Ref | None = Field(None, description="The conversation the messages "
                                        "come from, recorded as provenance.")
    scope: Scope = Field(Scope.user, description="The scope the facts are stored in; the "
                         "scope ref is the user id for `user`, else the agent id (`agent`) "
                         "or `scope_ref`.")
    scope_ref: Ref | None = Field(None, description="The scope ref for a scope other than "
                                  "user and agent (a team, a project …).")
    dry_run: bool = Field(False, description="Answer the decisions and write nothing.")


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    event: Event = Field(description="ADD a new fact, UPDATE a changed one (the old value is "
                         "kept in the memory's `previous`), DELETE a retracted one, NONE "
                         "(already known, nothing to retract, or refused).")
    key: str = Field(description="The memory's key: the kind of fact and a short slug of "
                     "its subject (`preference.response_format`, `uses.slack`).")
    value: str | None = Field(description="The fact's value (null for a DELETE and for a "
                              "sensitive statement, whose value is never repeated).")
    previous: str | None = Field(None, description="The value it replaced (UPDATE) or "
                                 "removed (DELETE).")
    reason: str = Field(description="Why: `new fact`, `changed`, `retracted`, `already "
                        "known`, `sensitive:<kind>` … and, after a model failure, that the "
                        "built-in extractor was used.")


class RememberOut(BaseModel):
    decisions: list[Decision] = Field(description="One decision per fact, in message order.")
    extractor: str = Field(description="Who extracted the facts: `builtin-v1`, or "
                           "`model-v1` with the model's name.")
    model: str | None = Field(None, description="The model that extracted them, if any.")
    dry_run: bool = Field(description="True: nothing was written.")
