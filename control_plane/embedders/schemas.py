"""What a tenant admin sends to route its embeddings to its own endpoint, and what it gets
back. The API key is a ``SecretStr``: sealed before it is stored, never in an answer, a log
line or an audit row; answers only say ``has_api_key``."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ..summarizers.schemas import BaseUrl, ModelName, SummarizerConfigIn


class EmbedderConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "base_url": "https://api.openai.com/v1", "model": "text-embedding-3-small",
        "api_key": "sk-...", "timeout_seconds": 30, "max_retries": 2}]})

    base_url: BaseUrl = Field(description="The API root; '/embeddings' is appended.",
                              json_schema_extra={"pattern": r"^https?://[^/?#@\s]+[^?#\s]*$"})
    model: ModelName = Field(description="The embedding model name the endpoint expects.")
    api_key: SecretStr | None = Field(
        None, description="Sent as 'Authorization: Bearer <key>'; stored sealed, never shown.")
    timeout_seconds: float = Field(30.0, gt=0, le=300,
                                   description="Per attempt: connect, send, each read.")
    max_retries: int = Field(2, ge=0, le=10,
                             description="Retries after a timeout, a 5xx or a 429.")

    _plain_url = field_validator("base_url")(SummarizerConfigIn._plain_url.__func__)  # type: ignore[attr-defined]
    _usable_key = field_validator("api_key")(SummarizerConfigIn._usable_key.__func__)  # type: ignore[attr-defined]


class EmbedderConfigOut(BaseModel):
    provider: Literal["openai_compatible", "hash", "semantic"] = Field(
        description="'hash' (built-in, offline, word overlap only) or 'semantic' (the "
        "all-MiniLM-L6-v2 sentence model, offline) is the server's default when no endpoint "
        "is configured.")
    base_url: str | None = Field(description="The endpoint's API root; null for the default.")
    model: str = Field(description="The embedder name stored with every vector "
                       "(the pointer's embedding_model).")
    dim: int = Field(description="Vector length.")
    has_api_key: bool = Field(description="Whether a key is stored; the key is never shown.")
    timeout_seconds: float | None = Field(description="Per attempt; null for the default.")
    max_retries: int | None = Field(description="Retries after a timeout, a 5xx or a 429; "
                                    "null for the default.")
    configured_at: datetime | None = Field(description="When the endpoint was configured; "
                                           "null for the default.")
