"""Agents as a resource: what ``PUT /v1/agents/{agent_id}`` takes and what it answers.

The seed spells the settings in camelCase (``memory.userMemory.storageConfigId``); both that
and snake_case are accepted, answers are snake_case.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StringConstraints

AgentName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                             max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
RETENTION = re.compile(r"^([1-9][0-9]{0,4})d$")
Retention = Annotated[str, StringConstraints(
    strip_whitespace=True, pattern=RETENTION.pattern)]
ConfigRef = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                             max_length=64)]


class UserMemoryIn(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    enabled: bool = Field(True, description="Whether the agent may write user memories "
                          "(scope user, or written with a user_id); false refuses them with "
                          "409 user_memory_disabled.")
    retention: Retention | None = Field(
        None, description="How long the agent's user memories are kept, as days: '90d' "
        "(1d to 99999d). Recorded and shown; retention policies apply it.", examples=["90d"])
    storage_config_id: ConfigRef | None = Field(
        None, validation_alias=AliasChoices("storage_config_id", "storageConfigId"),
        description="The storage configuration ('sc_…', see GET /v1/storage/configs) the "
        "agent's user memories go to; null: the tenant's default.",
        examples=["sc_0123456789abcdef0123456789abcdef"])


class AgentMemoryIn(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    user_memory: UserMemoryIn = Field(
        default_factory=UserMemoryIn,
        validation_alias=AliasChoices("user_memory", "userMemory"),
        description="The agent's user-memory settings.")


class AgentIn(BaseModel):
    """A PUT: every setting left out takes its default."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"name": "Support bot", "memory": {"user_memory": {
            "enabled": True, "retention": "90d",
            "storage_config_id": "sc_0123456789abcdef0123456789abcdef"}}}]})

    name: AgentName | None = Field(None, description="A display name.")
    memory: AgentMemoryIn = Field(default_factory=AgentMemoryIn,
                                  description="The agent's memory settings.")


class UserMemoryOut(BaseModel):
    enabled: bool = Field(description="Whether the agent may write user memories.")
    retention: str | None = Field(description="The retention as given, e.g. '90d'.")
    retention_days: int | None = Field(description="The same in days.")
    storage_config_id: str | None = Field(description="Where its user memories go ('sc_…'); "
                                          "null: the tenant's default.")


class AgentMemoryOut(BaseModel):
    user_memory: UserMemoryOut = Field(description="The agent's user-memory settings.")


class AgentOut(BaseModel):
    agent_id: str = Field(description="The agent's id, as memories and keys name it.")
    name: str | None = Field(description="Its display name.")
    memory: AgentMemoryOut = Field(description="The agent's memory settings.")
    created_at: datetime = Field(description="When the agent was first set up (UTC).")
    updated_at: datetime = Field(description="When its settings last changed (UTC).")


class AgentPage(BaseModel):
    items: list[AgentOut] = Field(description="Agents ordered by agent id.")
    next_cursor: str | None = Field(description="Pass back as cursor for the next page; null "
                                    "at the end.")
