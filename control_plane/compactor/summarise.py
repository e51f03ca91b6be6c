"""Summarising a chunk of events with the tenant's summariser (``summarizers``).

The bodies leave memory as soon as they are summarised; a summary with no text to keep is
refused (``EmptySummary``), as an entry needs one.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from ..settings import Settings
from .selection import Item

if TYPE_CHECKING:
    from ..summarizers import Summarizer, Summary


class EmptySummary(Exception):
    """The summariser answered nothing to keep: an entry needs a summary."""


def tenant_summarizer(session: Session, settings: Settings, tenant_id: uuid.UUID) -> Summarizer:
    """The tenant's summariser for compaction, routed by each bucket's scope
    (``summarizers.routing``: the scope's rule, else the purpose's, else the tenant's
    summariser config, else offline), each rule with a budget of its own."""
    from ..summarizers.routing import routed_summarizer

    found = routed_summarizer(session, settings, tenant_id, "compaction")
    session.rollback()
    return found


def summarise(item: Item, summarizer: Summarizer) -> Summary:
    """The chunk's summary; ``EmptySummary`` if it holds no text."""
    from ..summarizers import EventText

    assert item.events is not None and item.bodies is not None
    texts = [EventText(e.id, e.kind, e.occurred_at, item.bodies[e.id]) for e in item.events]
    item.bodies = None  # the bodies leave memory as soon as they are summarised
    summary = summarizer.summarize(item.bucket.scope, item.bucket.scope_ref, texts)
    if not summary.text.strip():
        raise EmptySummary()
    return summary
