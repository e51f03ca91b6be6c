"""Re-summarising a compactor entry (``POST /v1/compactor/resummarize``): a new version of
the entry written from the very events it summarised (its provenance), e.g. after the
tenant's model changed.

  1. the entry's provenance (404 for another tenant's or an unknown id, and for one outside
     a scoped key's scopes); every event it covers must still exist, unchanged (their
     SHA-256 as summarised): otherwise 409 ``provenance_gone`` and nothing is written;
  2. the bodies read hash-verified, summarised by the summariser the compactor would use
     now for the entry's scope (``summarizers.routing``);
  3. when the replaced version is of importance ``KEEP_DECISIONS_AT`` or more, its decision
     lines (``extractive.is_decision``) that the new text does not carry word for word are
     kept, verbatim, in a marked list after it;
  4. the new version is written as an entry overwrite (``entries.update_entry``: version + 1,
     its title, tags and importance kept), then the provenance names the new summariser.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ..audit import service as audit
from ..audit.service import audited
from ..db.engine import begin_write
from ..db.models import Compaction, MemoryEvent, MemoryPointer
from ..errors import Conflict, DomainError, NotFound
from ..identity import EVERYTHING, Access, Actor
from ..plane.data_plane import DataPlane
from ..settings import Settings
from ..tenants.access import ensure_visible
from . import repository as repo
from .repository import Bucket
from .schemas import ResummarizeOut
from .selection import Item
from .summarise import EmptySummary, summarise, tenant_summarizer

KEEP_DECISIONS_AT = 5
KEPT_HEADING = "Decisions kept from the replaced version (importance {importance}):"


class ProvenanceGone(Conflict):
    code = "provenance_gone"


class SummarizerUnavailable(DomainError):
    status_code = 502
    code = "summarizer_failed"


def kept_decisions(previous: str, new: str) -> list[str]:
    """The decision lines of ``previous`` the ``new`` text does not hold word for word."""
    from ..summarizers.extractive import is_decision

    kept: list[str] = []
    for line in previous.splitlines():
        text = line.strip()
        if text.startswith("- "):
            text = text[2:].strip()
        if text and is_decision(text) and text not in new and text not in kept \
                and not text.startswith(KEPT_HEADING.split("(")[0]):
            kept.append(text)
    return kept


def resummarize(session: Session, plane: DataPlane, settings: Settings, actor: Actor,
                entry_id: uuid.UUID, *, access: Access = EVERYTHING) -> ResummarizeOut:
    """Write a new version of compactor entry ``entry_id`` from its provenance events."""
    from ..entries import service as entries
    from ..entries.schemas import EntryUpdate
    from ..events import service as events_service
    from ..summarizers import BudgetSpent, SummarizerFailed

    with audited(session, actor, "compact_resummarize", pointer_id=entry_id):
        found = repo.compaction_of(session, actor.tenant_id, entry_id)
        missing = f"no compactor entry {entry_id}"
        if found is None:
            raise NotFound(missing)
        compaction, covered = found
        ensure_visible(session, actor, access, compaction.scope_type, compaction.scope_ref,
                       operation="compact_resummarize", what="compactor entry",
                       missing=missing)
        hashes = {c.event_id: c.event_sha256 for c in covered}
        events = list(session.scalars(select(MemoryEvent).where(
            MemoryEvent.tenant_id == actor.tenant_id, MemoryEvent.id.in_(list(hashes)))
            .order_by(MemoryEvent.occurred_at, MemoryEvent.id)))
        intact = [e for e in events if e.content_sha256 == hashes[e.id]]
        # Retention deletes an event's provenance row with it: count against event_count.
        if not intact or len(intact) != compaction.event_count:
            raise ProvenanceGone(
                f"{compaction.event_count - len(intact)} of the {compaction.event_count} "
                "events this entry "
                "summarised are gone (erased, or deleted by retention): it cannot be "
                "re-summarised, and its current version stays")
        previous = entries.get_entry(session, plane, actor, entry_id, access=access)
        bodies = events_service.read_bodies(session, plane, actor.tenant_id, intact,
                                            actor=actor)
        summarizer = tenant_summarizer(session, settings, actor.tenant_id)
        item = Item(Bucket(compaction.scope_type, compaction.scope_ref, len(intact)), True,
                    intact, bodies)
        try:
            summary = summarise(item, summarizer)
        except (SummarizerFailed, BudgetSpent, EmptySummary) as exc:
            problem = getattr(exc, "code", "budget_spent" if isinstance(exc, BudgetSpent)
                              else "empty_summary")
            raise SummarizerUnavailable(
                f"the summariser could not summarise this entry's events now ({problem}); "
                "its current version stays — retry later or check the model routing",
                problem=problem) from None
        pointer, text = previous.pointer, summary.text
        kept: list[str] = []
        if pointer.importance >= KEEP_DECISIONS_AT and previous.summary:
            kept = kept_decisions(previous.summary, text)
        if kept:
            text += "\n\n" + KEPT_HEADING.format(importance=pointer.importance) + "\n" + \
                "\n".join(f"- {line}" for line in kept)
        # Built, not validated: "compactor" is a source the API refuses from callers.
        fields: dict[str, Any] = {
            "title": pointer.title or "Compacted", "summary": text,
            "tags": list(pointer.tags or []), "importance": pointer.importance,
            "source": "compactor"}
        spec = EntryUpdate.model_construct(**fields)
        was = (compaction.provider, compaction.model, compaction.prompt_version)
        written = entries.update_entry(session, plane, actor, entry_id, spec, access=access)
        assert isinstance(written, MemoryPointer)
        begin_write(session)
        session.execute(update(Compaction).where(
            Compaction.id == entry_id, Compaction.tenant_id == actor.tenant_id).values(
            provider=summary.provider, model=summary.model,
            prompt_version=summary.prompt_version))
        audit.record(session, actor, "compact_resummarize", pointer_id=entry_id,
                     detail=f"entry v{written.version} from {len(intact)} events by "
                            f"{summary.provider} {summary.model} prompt "
                            f"{summary.prompt_version} (was {was[0]} {was[1]} prompt "
                            f"{was[2]}); {len(kept)} decisions kept")
        session.commit()
        return ResummarizeOut(
            entry_id=entry_id, version=written.version, event_count=len(intact),
            provider=summary.provider, model=summary.model,
            prompt_version=summary.prompt_version, previous_provider=was[0],
            previous_model=was[1], previous_prompt_version=was[2], decisions_kept=len(kept))
