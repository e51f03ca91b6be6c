"""Automatic summarisation of a conversation's older messages (a job, one per conversation at
a time: ``service.queue_summary``).

The newest messages whose tokens fit in ``MEMPLANE_CONVERSATION_KEEP_RECENT`` × the limit
stay word for word; every older message not yet covered goes, after the previous summary
(first, so summaries roll forward), to the tenant's summariser (``summarizers``: its
OpenAI-compatible endpoint, else the offline extractive one). The summary is a keyed memory
(key ``summary``, memory type ``summary``, the conversation's subject) holding its text and
the last seq it covers (``through``).

Steps, each safe to rerun:
  1. read the row and the previous summary (its ``through`` — not the row's — says which
     messages it already holds, so a summary written by a run that crashed before step 3 is
     built on, never repeated);
  2. summarise, write the summary through the memories write path;
  3. lock the row: ``summary_pointer_id``, ``summarized_through``, ``context_window_tokens``
     recomputed from the message rows after ``through`` (never added to, so never counted
     twice), ``needs_summarization`` re-evaluated.
A summariser failure (``SummarizerFailed``, ``BudgetSpent``) changes nothing: the job ends
with the reason, ``needs_summarization`` stays on, and the next message (or
``POST …/summarize``) queues another try.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from typing import Any

from sqlalchemy.orm import Session

from ..audit import service as audit
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import Conversation, MemoryPointer
from ..errors import NotFound
from ..identity import Actor
from ..jobs.service import JobContext
from ..memories import repository as memories_repo
from ..memories import service as memories
from ..memories.schemas import MemoryMeta
from ..plane.data_plane import DataPlane
from ..settings import Settings
from ..summarizers import BudgetSpent, EventText, SummarizerFailed, TokenBudget
from ..summarizers.routing import summarizer_for_purpose
from . import repository as repo
from . import tokens
from .service import SUMMARY_KEY, address_of, due, read_messages

log = logging.getLogger(__name__)


def run_job(ctx: JobContext) -> dict[str, Any]:
    return summarize(ctx.session, ctx.plane, ctx.settings, ctx.actor, ctx.tenant_id,
                     uuid.UUID(ctx.params["conversation"]), job_id=ctx.job_id)


def previous_summary(session: Session, plane: DataPlane, actor: Actor,
                     row: Conversation) -> tuple[MemoryPointer, str, int] | None:
    """The stored summary (pointer, text, last seq it covers), verified; None if none.
    Found by its key, not by ``summary_pointer_id``: a run that wrote it and died before
    recording it on the row left it there to be built on."""
    pointer = memories_repo.get(session, row.tenant_id,
                                address_of(row.conversation_id, SUMMARY_KEY))
    session.commit()
    if pointer is None or pointer.sync_status in ("pending_delete", "pending_write"):
        return None
    value = memories.read_pointer(session, plane, actor, pointer).value
    return pointer, str(value["text"]), int(value["through"])


def summarize(session: Session, plane: DataPlane, settings: Settings, actor: Actor,
              tenant_id: uuid.UUID, row_id: uuid.UUID, *,
              job_id: uuid.UUID | None = None) -> dict[str, Any]:
    row = repo.get_by_row(session, tenant_id, row_id)
    if row is None:
        session.rollback()
        return {"summarized": False, "reason": "conversation_deleted"}
    conversation_id = row.conversation_id
    previous = previous_summary(session, plane, actor, row)
    covered = max(row.summarized_through, previous[2] if previous else 0)
    pending = repo.messages(session, row.id, after=covered)
    keep = int(row.context_window_limit * settings.conversation_keep_recent)
    kept_tokens, cut = 0, len(pending)
    for index in range(len(pending) - 1, -1, -1):
        if kept_tokens + pending[index].tokens > keep:
            break
        kept_tokens += pending[index].tokens
        cut = index
    older = pending[:cut]
    session.commit()
    through, summary_pointer = covered, previous[0] if previous else None
    text = previous[1] if previous else ""
    provider = ""
    if older:
        stored = read_messages(session, plane, actor, older)
        items = ([EventText(previous[0].id, "summary", previous[0].updated_at, previous[1])]
                 if previous else [])
        items += [EventText(m.row.pointer_id, m.role, m.row.created_at, m.content)
                  for m in stored]
        try:
            summarizer = summarizer_for_purpose(session, settings, tenant_id,
                                                "conversation_summary", TokenBudget(),
                                                scope="conversation")
            session.rollback()
            result = summarizer.summarize("conversation", row.conversation_id, items)
        except (SummarizerFailed, BudgetSpent) as exc:
            session.rollback()
            code = getattr(exc, "code", "budget_spent")
            _finish_failed(session, actor, row_id, tenant_id, job_id, code)
            return {"summarized": False, "reason": code}
        through, text, provider = older[-1].seq, result.text, result.provider
        plane.checkpoint("conversation_summary:before_write")
        written = memories.set_value(
            session, plane, actor, address_of(row.conversation_id, SUMMARY_KEY),
            {"text": text, "through": through, "provider": result.provider,
             "model": result.model, "prompt_version": result.prompt_version},
            MemoryMeta(memory_type="summary", user_id=row.subject_user_id,
                       agent_id=row.agent_id))
        assert isinstance(written, MemoryPointer)
        summary_pointer = written
        plane.checkpoint("conversation_summary:after_write")
    begin_write(session)
    row = repo.get_by_row(session, tenant_id, row_id, for_update=True)
    if row is None:
        session.rollback()
        if older:  # deleted meanwhile: the summary written for it goes too
            gone_address = address_of(conversation_id, SUMMARY_KEY)
            with contextlib.suppress(NotFound):
                memories.delete_value(session, plane, actor, gone_address)
        return {"summarized": False, "reason": "conversation_deleted"}
    if summary_pointer is not None and through >= row.summarized_through:
        row.summary_pointer_id = summary_pointer.id
        row.summarized_through = through
        row.summary_tokens = tokens.for_model(row.model).message(text) if text else 0
    row.context_window_tokens = repo.tokens_after(session, row.id, row.summarized_through)
    row.needs_summarization = due(row, settings)
    if job_id is not None:
        repo.clear_job(session, row.id, job_id)
    row.updated_at = utcnow()
    audit.record(session, actor, "summarize", pointer_id=summary_pointer.id
                 if summary_pointer is not None else None,
                 detail=f"conversation: {len(older)} messages summarised through "
                        f"{row.summarized_through}")
    answer = {"summarized": bool(older), "messages": len(older),
              "summarized_through": row.summarized_through,
              "context_window_tokens": row.context_window_tokens,
              "summary_tokens": row.summary_tokens, "provider": provider}
    session.commit()
    return answer


def _finish_failed(session: Session, actor: Actor, row_id: uuid.UUID, tenant_id: uuid.UUID,
                   job_id: uuid.UUID | None, code: str) -> None:
    begin_write(session)
    if job_id is not None:
        repo.clear_job(session, row_id, job_id)
    audit.record(session, actor, "summarize", success=False,
                 detail=f"conversation: summariser failed ({code}); nothing changed")
    session.commit()
    log.info("conversation summary not written: %s", code)
