"""Context assembly (``POST /v1/conversations/{id}/context``): the window for the next model
call, within a token budget, in the seed's priority order:

  1. the system prompt and 2. the current message — always (a budget they alone exceed is
     refused with 422, saying by how much);
  3. recent memory: the most relevant memories of the named scopes (``MemorySearch``), then
     their curated entries by importance, then their newest *uncompressed* events (a
     compressed event is never loaded: the compactor's entry stands for it). With
     ``memory_scopes`` omitted the scopes are the conversation's own (``default_scopes``):
     its data subject (user scope, and the subject's memories in the other scopes that
     hold some, at most ``SUBJECT_SCOPES``), its agent (agent scope: memories and
     knowledge) and the agent's teams — each only if the key may see it; ``[]`` names none;
  4. recent conversation: the latest messages not covered by the summary, newest first,
     until one does not fit (older ones then stay out, so the window never has a hole);
  5. older context: the conversation's summary (cut to what is left if it does not fit);
     without a summary the conversation is truncated to the messages that fit.

Tokens are counted with the real tokenizer of the model (``tokens``); every section costs
``tokens.message(content)`` and the answer's ``total_tokens`` is their sum, ≤ the budget.
Window order: system prompt, memory, older context, recent messages (oldest first), current
message. One audit row (``context``) records the counts only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sqlalchemy.orm import Session

from ..addresses import MemoryAddress, Scope
from ..audit import service as audit
from ..audit.service import audited
from ..entries import service as entries
from ..errors import HashMismatch, InvalidInput, NotFound, StorageUnavailable
from ..events import service as events
from ..identity import EVERYTHING, Access, Actor
from ..plane.data_plane import DataPlane
from ..settings import Settings
from ..teams.api import team_ids_of
from ..tenants.access import ensure_visible as access_check
from . import repository as repo
from . import tokens
from .schemas import ContextIn, ContextOut, ReportItem, SearchedScope, Section
from .service import address_of, find, read_messages
from .summarize import previous_summary

if TYPE_CHECKING:
    from ..search.service import Searching

MEMORY_HEADER = "Relevant memory:"
SUMMARY_HEADER = "Summary of the earlier conversation:"
_READ_BATCH = 32
_QUERY_CHARS = 2000  # the search's longest query; the current message's start stands for it
SUBJECT_SCOPES = 10  # the other scopes searched for the subject's memories, newest first


@dataclass(frozen=True)
class Recalled:
    """One memory a search found: its pointer id, its text as the window shows it, score."""

    id: str
    text: str
    score: float


class MemorySearch(Protocol):
    """The most relevant memories of the scopes (and of ``about``: (scope, scope ref,
    user id), only the memories about that data subject), best first; None when no search
    is available on this server."""

    def __call__(self, session: Session, plane: DataPlane, actor: Actor, access: Access,
                 query: str, scopes: list[tuple[str, str]], limit: int,
                 about: Sequence[tuple[str, str, str]] = ()) -> list[Recalled] | None: ...


def no_search(session: Session, plane: DataPlane, actor: Actor, access: Access, query: str,
              scopes: list[tuple[str, str]], limit: int,
              about: Sequence[tuple[str, str, str]] = ()) -> list[Recalled] | None:
    return None


# Memories that have their own place in the window: entries (by importance) and the
# conversation's own messages and summary.
_NOT_RECALLED = ("entry", "conversation_history", "summary")


def semantic_search(runtime: Searching) -> MemorySearch:
    """The server's semantic search (``search.service.search``, hybrid ranking, every hit
    verified and audited as ``search``) over each named scope, best scores first. None
    (reported as ``search_unavailable``) when the tenant's embedder cannot answer now."""
    from ..search import service as search
    from ..search.schemas import SearchIn
    from ..search.text import searchable_text

    def run(session: Session, plane: DataPlane, actor: Actor, access: Access, query: str,
            scopes: list[tuple[str, str]], limit: int,
            about: Sequence[tuple[str, str, str]] = ()) -> list[Recalled] | None:
        asks = [SearchIn(query=_plain(query), scope=Scope(scope), scope_ref=scope_ref,
                         limit=min(100, limit + 10)) for scope, scope_ref in scopes]
        asks += [SearchIn(query=_plain(query), scope=Scope(scope), scope_ref=scope_ref,
                          user_id=user_id, limit=min(100, limit + 10))
                 for scope, scope_ref, user_id in about]
        hits, seen = [], set()
        for ask in asks:
            try:
                found = search.search(session, runtime, actor, ask, access=access)
            except StorageUnavailable:
                session.rollback()
                return None
            for hit in found.hits:
                if hit.memory_type not in _NOT_RECALLED and hit.pointer_id not in seen:
                    seen.add(hit.pointer_id)
                    hits.append(hit)
        hits.sort(key=lambda h: -h.score)  # stable: between equal scores, the first found
        return [Recalled(str(h.pointer_id), searchable_text(h.value, h.title), h.score)
                for h in hits[:limit]]

    return run


def _plain(text: str) -> str:
    """The query search accepts: no control characters (newlines become spaces), at most
    its length, never empty."""
    flat = "".join(" " if ord(c) < 0x20 or ord(c) == 0x7f else c for c in text)
    return flat.strip()[:_QUERY_CHARS] or "-"


class _Window:
    def __init__(self, counter: tokens.Tokenizer, budget: int) -> None:
        self.counter = counter
        self.budget = budget
        self.used = 0
        self.report: list[ReportItem] = []

    @property
    def left(self) -> int:
        return self.budget - self.used

    def note(self, kind: str, item_id: str, status: str, reason: str | None,
             tokens_: int) -> None:
        self.report.append(ReportItem(kind=kind, id=item_id, status=status,  # type: ignore[arg-type]
                                      reason=reason, tokens=tokens_))


def assemble(session: Session, plane: DataPlane, settings: Settings, actor: Actor,
             conversation_id: str, spec: ContextIn, *, access: Access = EVERYTHING,
             search: MemorySearch = no_search) -> ContextOut:
    # Every read's audit row (the search, the entries, the messages) and the context's own
    # go in one durable commit, before the answer (I6).
    with audited(session, actor, "context", detail="conversation",
                 private=(conversation_id,)), \
            audit.reads_committed_together(session, plane, actor):
        conversation_id = address_of(conversation_id).scope_ref
        row = find(session, actor, access, conversation_id, "context")
        searched: list[SearchedScope] = []
        if spec.memory_scopes is None:
            searched = default_scopes(session, actor, access, row.subject_user_id,
                                      row.agent_id)
        for named in spec.memory_scopes or []:
            address = MemoryAddress.parse(named.scope, named.scope_ref)
            access_check(session, actor, access, address.scope, address.scope_ref,
                         operation="context", what=f"{address.scope} memory",
                         missing=f"no memory at {address.describe()}")
            searched.append(SearchedScope(scope=address.scope, scope_ref=address.scope_ref,
                                          reason="requested"))
        scopes = list(dict.fromkeys((s.scope, s.scope_ref) for s in searched
                                    if s.user_id is None))
        about = [(s.scope, s.scope_ref, s.user_id) for s in searched if s.user_id is not None]
        counter = tokens.for_model(spec.model or row.model)
        window = _Window(counter, spec.token_budget)
        system_tokens = counter.message(spec.system_prompt)
        message_tokens = counter.message(spec.message)
        fixed = system_tokens + message_tokens
        if fixed > spec.token_budget:
            raise InvalidInput(
                f"the system prompt ({system_tokens} tokens) and the message ({message_tokens} "
                f"tokens) alone take {fixed} tokens, {fixed - spec.token_budget} over the "
                f"token_budget of {spec.token_budget}; raise token_budget or shorten them")
        window.used = fixed
        window.note("system_prompt", "system_prompt", "included", None, system_tokens)
        window.note("current_message", "current_message", "included", None, message_tokens)
        session.commit()

        memory = _memory_section(session, plane, actor, access, spec, scopes, about, window,
                                 search)
        summary = previous_summary(session, plane, actor, row)
        covered = max(row.summarized_through, summary[2] if summary else 0)
        recent = _recent_messages(session, plane, actor, row.id, covered, window)
        older = _older_context(summary, window)
        # The messages the summary covers: only their rows (none to read if it covers none).
        for message_row in (repo.messages(session, row.id, through=covered) if covered
                            else []):
            if older is not None:
                window.note("message", str(message_row.seq), "summarized",
                            "superseded_by_summary", message_row.tokens)
            else:
                window.note("message", str(message_row.seq), "dropped", "budget",
                            message_row.tokens)
        session.commit()

        sections = [Section(role="system", kind="system_prompt", content=spec.system_prompt,
                            tokens=system_tokens)]
        if memory is not None:
            sections.append(memory)
        if older is not None:
            sections.append(older)
        sections += recent
        sections.append(Section(role="user", kind="current_message", content=spec.message,
                                tokens=message_tokens))
        total = sum(s.tokens for s in sections)
        by_kind: dict[str, int] = {}
        for section in sections:
            by_kind[section.kind] = by_kind.get(section.kind, 0) + section.tokens
        counts: dict[str, int] = {}
        for item in window.report:
            counts[item.status] = counts.get(item.status, 0) + 1
        audit.commit_reads(session, plane, actor, [
            ("context", None, f"conversation context: {total}/{spec.token_budget} tokens, "
                              f"{counts.get('included', 0)} included, "
                              f"{counts.get('summarized', 0)} summarized, "
                              f"{counts.get('dropped', 0)} dropped")])
        return ContextOut(sections=sections, total_tokens=total, token_budget=spec.token_budget,
                          encoding=counter.encoding, tokens_by_kind=by_kind,
                          report=window.report, searched_scopes=searched)


def default_scopes(session: Session, actor: Actor, access: Access, user_id: str | None,
                   agent_id: str | None) -> list[SearchedScope]:
    """The conversation's own scopes that the key may see: its data subject's, its agent's,
    the agent's teams', then the other scopes holding memories about the subject (searched
    for those only). What the key may not see is left out silently: the caller named none
    of it."""
    wanted: list[tuple[str, str, str]] = []
    if user_id is not None:
        wanted.append(("user", user_id, "data_subject"))
    if agent_id is not None:
        wanted.append(("agent", agent_id, "agent"))
        wanted += [("team", team, "team") for team in team_ids_of(session, actor.tenant_id,
                                                                  agent_id)]
    found = [SearchedScope(scope=scope, scope_ref=ref, reason=reason)  # type: ignore[arg-type]
             for scope, ref, reason in wanted if access.may(session, scope, ref)]
    if user_id is not None:
        whole = {(s.scope, s.scope_ref) for s in found} | {(s, r) for s, r, _ in wanted}
        found += [SearchedScope(scope=scope, scope_ref=ref, reason="data_subject",
                                user_id=user_id)
                  for scope, ref in repo.subject_scopes(session, actor.tenant_id, user_id,
                                                        SUBJECT_SCOPES + len(whole))
                  if (scope, ref) not in whole
                  and access.may(session, scope, ref, user_id)][:SUBJECT_SCOPES]
    return found


def _memory_section(session: Session, plane: DataPlane, actor: Actor, access: Access,
                    spec: ContextIn, scopes: list[tuple[str, str]],
                    about: list[tuple[str, str, str]], window: _Window,
                    search: MemorySearch) -> Section | None:
    """Relevant memories, then entries by importance, then recent uncompressed events, as
    one system section; each item goes in while the section still fits."""
    candidates: list[tuple[str, str, str]] = []  # (kind, id, text)
    if (scopes or about) and spec.memory_limit:
        found = search(session, plane, actor, access, spec.message, scopes, spec.memory_limit,
                       about)
        session.commit()
        if found is None:
            window.note("memory", "search", "dropped", "search_unavailable", 0)
        for recalled in found or []:
            candidates.append(("memory", recalled.id, recalled.text))
        for scope, scope_ref in scopes:
            listed, _ = entries.list_entries(session, plane, actor, scope=scope,
                                             scope_ref=scope_ref, include_summary=True,
                                             limit=100, access=access)
            listed.sort(key=lambda e: (-e.pointer.importance, -e.pointer.updated_at.timestamp()))
            for entry in listed[:spec.memory_limit]:
                if entry.summary is not None:
                    title = f"{entry.pointer.title}: " if entry.pointer.title else ""
                    candidates.append(("entry", str(entry.pointer.id), title + entry.summary))
        for scope, scope_ref in scopes:
            recent = repo.recent_events(session, actor.tenant_id, scope, scope_ref,
                                        spec.memory_limit)
            for event_id in repo.compressed_events(session, actor.tenant_id, scope, scope_ref,
                                                   spec.memory_limit):
                window.note("event", str(event_id), "dropped", "compressed", 0)
            try:
                bodies = events.read_bodies(session, plane, actor.tenant_id, recent, actor=actor)
            except HashMismatch:
                bodies = {}
                for event in recent:
                    window.note("event", str(event.id), "dropped", "unreadable", 0)
                recent = []
            for event in recent:
                candidates.append(("event", str(event.id),
                                   f"{event.occurred_at.date().isoformat()} ({event.kind}): "
                                   f"{bodies[event.id]}"))
    text, cost = MEMORY_HEADER, 0
    for kind, item_id, line in candidates:
        grown = f"{text}\n- {line}"
        grown_cost = window.counter.message(grown)
        item_tokens = grown_cost - cost  # the first item also pays for the header
        if item_tokens <= window.left:
            window.used += item_tokens
            text, cost = grown, grown_cost
            window.note(kind, item_id, "included", None, item_tokens)
        else:
            window.note(kind, item_id, "dropped", "budget", item_tokens)
    if not cost:
        return None
    return Section(role="system", kind="memory", content=text, tokens=cost)


def _recent_messages(session: Session, plane: DataPlane, actor: Actor, row_id: object,
                     covered: int, window: _Window) -> list[Section]:
    """The newest messages after the summary, newest first, until one does not fit."""
    rows = repo.messages(session, row_id, after=covered, newest_first=True)  # type: ignore[arg-type]
    session.commit()
    kept: list[Section] = []
    full = False
    for start in range(0, len(rows), _READ_BATCH):
        batch = rows[start:start + _READ_BATCH]
        if full:
            for r in batch:
                window.note("message", str(r.seq), "dropped", "budget", r.tokens)
            continue
        try:
            stored = read_messages(session, plane, actor, batch)
        except NotFound:
            stored = []
        for message in stored:
            cost = window.counter.message(message.content)
            if full or cost > window.left:
                full = True
                window.note("message", str(message.row.seq), "dropped", "budget", cost)
                continue
            window.used += cost
            window.note("message", str(message.row.seq), "included", None, cost)
            kept.append(Section(role=message.role, kind="message",  # type: ignore[arg-type]
                                content=message.content, tokens=cost))
    kept.reverse()
    return kept


def _older_context(summary: tuple[object, str, int] | None,
                   window: _Window) -> Section | None:
    if summary is None:
        return None
    pointer, text, _ = summary
    pointer_id = str(getattr(pointer, "id", ""))
    content = f"{SUMMARY_HEADER}\n{text}"
    cost = window.counter.message(content)
    if cost <= window.left:
        window.used += cost
        window.note("summary", pointer_id, "included", None, cost)
        return Section(role="system", kind="older_context", content=content, tokens=cost)
    room = window.left - window.counter.message(SUMMARY_HEADER + "\n")
    if room > 0:
        cut = f"{SUMMARY_HEADER}\n{window.counter.truncate(text, room)}"
        cut_cost = window.counter.message(cut)
        while cut_cost > window.left and room > 0:  # BPE at the seam may differ by a token
            room -= 1
            cut = f"{SUMMARY_HEADER}\n{window.counter.truncate(text, room)}"
            cut_cost = window.counter.message(cut)
        if room > 0:
            window.used += cut_cost
            window.note("summary", pointer_id, "included", "truncated_to_budget", cut_cost)
            return Section(role="system", kind="older_context", content=cut, tokens=cut_cost)
    window.note("summary", pointer_id, "dropped", "budget", cost)
    return None
