"""A tenant's settings of its features: summariser, compactor, embedder, agents."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Integer, LargeBinary, String, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from ..base import Base, BigId, UTCDateTime, new_id, utcnow


class SummarizerConfig(Base):
    """A tenant's summariser: an OpenAI-compatible chat endpoint. One row per
    tenant; no row means the built-in offline summariser. The API key is sealed with the
    server key like bucket credentials (plane/credentials.py), bound to this row."""

    __tablename__ = "summarizer_configs"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), unique=True)
    provider: Mapped[str] = mapped_column(String(32))
    base_url: Mapped[str] = mapped_column(String(1024))
    model: Mapped[str] = mapped_column(String(128))
    api_key_encrypted: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    timeout_ms: Mapped[int] = mapped_column(Integer)
    max_retries: Mapped[int] = mapped_column(Integer)
    token_budget_per_run: Mapped[int | None] = mapped_column(BigId, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ModelRoute(Base):
    """One rule of a tenant's model routing: calls for ``purpose`` (and, when set, of
    ``scope_type``) go to this OpenAI-compatible endpoint and model, within
    ``token_budget_per_run``. A tenant's rules are replaced together; the most specific
    matching rule wins, the tenant's summariser config is the fallback. The API key is
    sealed with the server key, bound to this row (``summarizers.routing``)."""

    __tablename__ = "model_routes"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    purpose: Mapped[str] = mapped_column(String(32))
    scope_type: Mapped[str | None] = mapped_column(String(16), nullable=True)
    base_url: Mapped[str] = mapped_column(String(1024))
    model: Mapped[str] = mapped_column(String(128))
    api_key_encrypted: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    timeout_ms: Mapped[int] = mapped_column(Integer)
    max_retries: Mapped[int] = mapped_column(Integer)
    token_budget_per_run: Mapped[int | None] = mapped_column(BigId, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class CompactorSettings(Base):
    """A tenant's compactor thresholds; a tenant without a row uses the defaults."""

    __tablename__ = "compactor_settings"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True)
    min_events: Mapped[int] = mapped_column(Integer)
    older_than_days: Mapped[int] = mapped_column(Integer)
    enabled: Mapped[bool] = mapped_column(Boolean)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AgentSettings(Base):
    """An agent as a resource: its name and its user-memory settings (the seed's
    ``agents.update({memory: {userMemory: {...}}})``). No row: user memory enabled, the
    tenant's default storage, no retention of its own."""

    __tablename__ = "agents"
    __table_args__ = (UniqueConstraint("tenant_id", "agent_id"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    agent_id: Mapped[str] = mapped_column(String(256))
    name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    user_memory_enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    user_memory_retention_days: Mapped[int | None] = mapped_column(Integer, nullable=True)
    user_memory_storage_config_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("storage_configs.id"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class EmbedderConfig(Base):
    """A tenant's embedder: an OpenAI-compatible embeddings endpoint. One row per tenant; no
    row means the server's default embedder. The API key is sealed with the server key like
    the summariser's, bound to this row. ``dim`` is what the probe answered."""

    __tablename__ = "embedder_configs"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), unique=True)
    provider: Mapped[str] = mapped_column(String(32))
    base_url: Mapped[str] = mapped_column(String(1024))
    model: Mapped[str] = mapped_column(String(128))
    dim: Mapped[int] = mapped_column(Integer)
    api_key_encrypted: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    timeout_ms: Mapped[int] = mapped_column(Integer)
    max_retries: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
