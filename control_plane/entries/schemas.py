from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ..addresses import Ref, Scope
from ..memories.schemas import SOURCE_DESCRIPTION, PointerOut, Source, Tag, pointer_json

EntryTitle = Annotated[str, StringConstraints(min_length=1, max_length=500,
                                              pattern=r"^[^\x00-\x1f\x7f]*$")]
# Markdown: newlines and tabs are fine; NUL and the other control characters are not.
Summary = Annotated[str, StringConstraints(min_length=1,
                                           pattern=r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$")]


class EntryFields(BaseModel):
    """What a PUT replaces (and a POST sets besides the scope and the subject)."""

    model_config = ConfigDict(extra="forbid")

    title: EntryTitle = Field(description="A short plain-text title, stored in the control "
                              "plane (keep personal details in the summary).",
                              examples=["Acme: ROAS target"])
    summary: Summary = Field(description="The entry itself, in Markdown; stored only in the "
                             "tenant's bucket, encrypted.",
                             examples=["Acme agreed a **ROAS target of 4** for Q3."])
    tags: list[Tag] = Field(default_factory=list, max_length=50, description="Up to 50 "
                            "plain-text tags, stored in the control plane.",
                            examples=[["decision"]])
    importance: int = Field(3, ge=1, le=5, description="1 (trivial) to 5 (critical).",
                            examples=[4])
    source: Source = Field("api", description=SOURCE_DESCRIPTION, examples=["call"])


class EntryIn(EntryFields):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"scope": "entity", "scope_ref": "ent_acme", "title": "Acme: ROAS target",
         "summary": "Acme agreed a **ROAS target of 4** for Q3.", "tags": ["decision"],
         "importance": 4, "source": "call"}]})

    scope: Scope = Field(description="tenant (or institutional), app, team, agent, user, "
                         "conversation, entity, project.", examples=["entity"])
    scope_ref: Ref = Field(description="Which entity, project, team … ('-' for tenant).",
                           examples=["ent_acme"])
    user_id: Ref | None = Field(None, description="The data subject the entry is about: "
                                "exports and erasures of this user include it.")
    agent_id: Ref | None = Field(None, description="The agent that wrote it.")


class EntryUpdate(EntryFields):
    """PUT: the title, summary, tags, importance and source replace the entry's."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"title": "Acme: ROAS target", "summary": "ROAS target raised to **5** for Q4.",
         "tags": ["decision"], "importance": 4, "source": "email"}]})


class EntryOut(PointerOut):
    summary: str | None = Field(description="The Markdown summary, read from the bucket and "
                                "verified against content_sha256; null in a list unless "
                                "include_summary (or search) asked for it.")

    @classmethod
    def with_summary(cls, pointer: Any, summary: str | None) -> EntryOut:
        return cls(**pointer_json(pointer), summary=summary)


class EntryPage(BaseModel):
    items: list[EntryOut] = Field(description="Entries, in a stable order.")
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on "
                                    "the last page.")
