"""Which summariser a tenant gets, and the tenant's summariser configuration."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from . import Summarizer, TokenBudget
from .extractive import ExtractiveSummarizer

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ..settings import Settings


def build_for_tenant(session: Session, runtime_or_settings: Runtime | Settings,
                     tenant_id: uuid.UUID, budget: TokenBudget) -> Summarizer:
    """The offline extractive summariser (per-tenant endpoints follow)."""
    return ExtractiveSummarizer()
