"""Conversations: messages as keyed memories, their token accounting, summary state.

Each message is a keyed memory written through the memories write path (scope
``conversation``, scope ref = the conversation id, key ``m/<seq, 8 digits>``, memory type
``conversation_history``, the conversation's user as data subject), so encryption, the
erasure guard, audit, export and erasure apply to it as to any memory. The control plane
keeps the conversation's counters and, per message, its seq, role and token count (no text,
I7).

Adding a message takes three steps, because the bucket is not in the transaction:
  1. lock the conversation row, hand out the next seq, commit;
  2. write the message through ``memories.set_value`` (object first, then its pointer);
  3. lock the row again, record the message's row and tokens, flip ``needs_summarization``
     and queue the summarisation job when due, remember the idempotent answer; commit.
A crash after 1 leaves an unused seq (a gap); after 2, a stored message no row counts, so it
is neither listed nor counted (the caller got no 201 and sends it again) — it is deleted
with the conversation and erased with its subject. Counters only ever move in step 3, from
rows: nothing is counted twice.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass

from sqlalchemy import exc as sa_exc
from sqlalchemy import select
from sqlalchemy.orm import Session

from .. import idempotency
from ..addresses import MemoryAddress, Scope
from ..audit import service as audit
from ..audit.service import audited
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import Conversation, ConversationMessage, Job, MemoryPointer
from ..dlp.guard import screen_fields
from ..errors import Conflict, Forbidden, HashMismatch, InvalidInput, NotFound
from ..idempotency import Idempotency, Replay
from ..identity import EVERYTHING, Access, Actor
from ..jobs.service import enqueue
from ..keys import repository as keys_repo
from ..keys.pseudonyms import pseudonym
from ..kit import decode_cursor, encode_cursor, page_limit
from ..memories import batch_gets
from ..memories import service as memories
from ..memories.schemas import MemoryMeta
from ..plane.data_plane import DataPlane
from ..search import drop as search_drop
from ..settings import Settings
from ..tenants.access import ensure_in_scopes
from ..tenants.access import ensure_visible as access_check
from . import repository as repo
from . import tokens
from .schemas import ConversationOut, MessageAdded, MessageIn, MessageOut, threshold_tokens

JOB_KIND = "summarize_conversation"
REMEMBER_JOB_KIND = "remember"  # its handler is registered by the composition root
SUMMARY_KEY = "summary"


def message_key(seq: int) -> str:
    return f"m/{seq:08d}"


def address_of(conversation_id: str, key: str | None = None) -> MemoryAddress:
    """Validates the id like a scope ref (one path segment, no control characters, …)."""
    return MemoryAddress.parse(Scope.conversation, conversation_id, key)


def _missing(conversation_id: str) -> str:
    return f"no conversation {conversation_id!r}"


def check_access(session: Session, actor: Actor, access: Access, conversation_id: str,
                 operation: str) -> None:
    access_check(session, actor, access, "conversation", conversation_id, operation=operation,
                 what="conversation", missing=_missing(conversation_id))


def find(session: Session, actor: Actor, access: Access, conversation_id: str,
         operation: str, *, for_update: bool = False) -> Conversation:
    check_access(session, actor, access, conversation_id, operation)
    row = repo.get(session, actor.tenant_id, conversation_id, for_update=for_update)
    if row is None:
        raise NotFound(_missing(conversation_id))
    return row


def state_of(row: Conversation, settings: Settings) -> ConversationOut:
    return ConversationOut.of(row, tokens.encoding_name(row.model), settings.summarize_at)


def due(row: Conversation, settings: Settings) -> bool:
    return row.context_window_tokens >= threshold_tokens(row.context_window_limit,
                                                         settings.summarize_at)


def queue_summary(session: Session, row: Conversation) -> uuid.UUID:
    """In the open write transaction, the row locked: the conversation's active
    summarisation job, or a new one — never two at a time for one conversation."""
    if row.summary_job_id is not None and repo.job_active(session, row.summary_job_id):
        return row.summary_job_id
    # Not held to the job quota: one at a time per conversation, and queued as part of a
    # message whose value is in the bucket already.
    job = enqueue(session, row.tenant_id, JOB_KIND, subject=None,
                  params={"conversation": str(row.id)}, quota=False)
    row.summary_job_id = job.id
    return job.id


# -- add a message ----------------------------------------------------------------------------

def add_message(session: Session, plane: DataPlane, settings: Settings, actor: Actor,
                conversation_id: str, spec: MessageIn, *, access: Access = EVERYTHING,
                idem: Idempotency | None = None) -> MessageAdded | Replay:
    with audited(session, actor, "write", detail="conversation message",
                 private=(conversation_id, spec.user_id)):
        address = address_of(conversation_id)
        conversation_id = address.scope_ref
        # A message names its conversation: outside the key's scopes it is refused plainly
        # (403), as a write on the other layers is; reads still answer as missing.
        ensure_in_scopes(session, actor, access, "conversation", conversation_id,
                         operation="write", what="conversation")
        if access.agent_id is not None:
            if spec.agent_id not in (None, access.agent_id):
                raise Forbidden(f"this key writes as agent {access.agent_id!r}; leave "
                                f"agent_id out or send that one")
            spec = spec.model_copy(update={"agent_id": access.agent_id})
        if idem is not None:
            replay = idempotency.find(session, actor, idem)
            if replay is not None:
                return _replayed(session, actor, replay)
        spec = screen_fields(session, actor, spec, ("content",), what="the message")
        seq, row_id, subject, model = _reserve(session, actor, conversation_id, spec)
        if spec.remember and subject is not None and not access.allows("user", subject):
            raise Forbidden("remember writes the user's memory, which this key does not "
                            "reach; send the message without remember, or use a key with "
                            "the scope user/<user_id>")
        counter = tokens.for_model(model)
        cost = counter.message(spec.content)
        value = {"role": spec.role, "content": spec.content, "seq": seq}
        meta = MemoryMeta(memory_type="conversation_history", user_id=subject,
                          agent_id=spec.agent_id, source="chat")
        pointer = memories.set_value(session, plane, actor,
                                     address_of(conversation_id, message_key(seq)), value,
                                     meta, access=access)
        assert isinstance(pointer, MemoryPointer)
        begin_write(session)
        row = repo.get_by_row(session, actor.tenant_id, row_id, for_update=True)
        if row is None:
            session.rollback()
            with contextlib.suppress(NotFound):  # its conversation is gone: so is the message
                memories.delete_value(session, plane, actor,
                                      address_of(conversation_id, message_key(seq)))
            raise Conflict("the conversation was deleted while the message was being "
                           "written; send it again to start a new one")
        now = utcnow()
        session.add(ConversationMessage(conversation_row_id=row.id, seq=seq,
                                        pointer_id=pointer.id, role=spec.role, tokens=cost,
                                        created_at=now))
        row.message_count += 1
        if seq > row.summarized_through:
            row.context_window_tokens += cost
        row.needs_summarization = due(row, settings)
        if row.needs_summarization:
            queue_summary(session, row)
        row.updated_at = now
        remember_job = None
        if spec.remember and row.subject_user_id is not None:
            # Not held to the job quota, as the summary's: one per message, queued as part of
            # a message already written; the job holds ids only, never content.
            remember_job = enqueue(session, row.tenant_id, REMEMBER_JOB_KIND, subject=None,
                                   params={"conversation": str(row.id), "through": seq},
                                   quota=False).id
        session.flush()
        answer = MessageAdded(seq=seq, tokens=cost, pointer_id=pointer.id,
                              user_id=row.subject_user_id,
                              conversation=state_of(row, settings),
                              remember_job_id=remember_job)
        if idem is not None:
            idempotency.remember(session, actor, idem, 201,
                                 answer.model_dump(mode="json"))
        try:
            session.commit()
        except sa_exc.IntegrityError:
            # A twin request with the same Idempotency-Key answered first.
            session.rollback()
            replay = idempotency.find(session, actor, idem) if idem else None
            if replay is None:
                raise
            return _replayed(session, actor, replay)
        return answer


def _replayed(session: Session, actor: Actor, replay: Replay) -> Replay:
    session.rollback()
    begin_write(session)
    audit.record(session, actor, "replay", pointer_id=uuid.UUID(replay.response["pointer_id"]),
                 detail="idempotency key answered from the first request")
    session.commit()
    return replay


def _reserve(session: Session, actor: Actor, conversation_id: str,
             spec: MessageIn) -> tuple[int, uuid.UUID, str | None, str]:
    """Step 1: create or lock the row, check the message fits it, hand out the next seq."""
    for _ in range(3):
        session.rollback()
        begin_write(session)
        row = repo.get(session, actor.tenant_id, conversation_id, for_update=True)
        now = utcnow()
        if row is None:
            model = spec.model or tokens.DEFAULT_MODEL
            row = Conversation(
                id=new_id(), tenant_id=actor.tenant_id, conversation_id=conversation_id,
                subject_user_id=spec.user_id, agent_id=spec.agent_id, model=model,
                context_window_limit=spec.context_window_limit or tokens.default_limit(model),
                context_window_tokens=0, needs_summarization=False, summarized_through=0,
                summary_tokens=0, message_count=0, last_seq=0, created_at=now, updated_at=now)
            session.add(row)
        else:
            _check_fits(row, spec)
            if spec.context_window_limit is not None:
                row.context_window_limit = spec.context_window_limit
            if row.subject_user_id is None and spec.user_id is not None:
                row.subject_user_id = spec.user_id
            if row.agent_id is None and spec.agent_id is not None:
                row.agent_id = spec.agent_id
        row.last_seq += 1
        row.updated_at = now
        seq, row_id, subject, model = row.last_seq, row.id, row.subject_user_id, row.model
        try:
            session.commit()
        except sa_exc.IntegrityError:
            session.rollback()  # a concurrent first message created the row: lock that one
            continue
        return seq, row_id, subject, model
    raise Conflict("the conversation kept changing while the message was being added; retry")


def _check_fits(row: Conversation, spec: MessageIn) -> None:
    if spec.model is not None and spec.model != row.model:
        raise InvalidInput(f"this conversation counts tokens for model {row.model!r}, fixed by "
                           f"its first message; leave model out or send {row.model!r}")
    if (spec.user_id is not None and row.subject_user_id is not None
            and spec.user_id != row.subject_user_id):
        raise InvalidInput("user_id differs from the conversation's data subject; a "
                           "conversation has one subject (leave user_id out)")
    if spec.user_id is not None and row.subject_user_id is None and row.message_count > 0:
        raise InvalidInput("this conversation was started without a user_id, so its earlier "
                           "messages have no data subject; start a new conversation with "
                           "user_id on its first message")


# -- read ------------------------------------------------------------------------------------

def get_state(session: Session, settings: Settings, actor: Actor, conversation_id: str, *,
              access: Access = EVERYTHING) -> ConversationOut:
    with audited(session, actor, "read", detail="conversation", private=(conversation_id,)):
        conversation_id = address_of(conversation_id).scope_ref
        row = find(session, actor, access, conversation_id, "read")
        answer = state_of(row, settings)
        session.rollback()
        begin_write(session)
        audit.record(session, actor, "read", detail=f"conversation state: "
                                                    f"{row.message_count} messages")
        session.commit()
        return answer


@dataclass(frozen=True)
class StoredMessage:
    row: ConversationMessage
    role: str
    content: str


def read_messages(session: Session, plane: DataPlane, actor: Actor,
                  rows: list[ConversationMessage]) -> list[StoredMessage]:
    """The messages' values, each hash-verified (I3), read side by side
    (``batch_gets.read_pointers``); a message deleted meanwhile is left out; one that fails
    verification raises (409 hash_mismatch, audited by the read)."""
    pointers = {p.id: p for p in session.scalars(select(MemoryPointer).where(
        MemoryPointer.tenant_id == actor.tenant_id,
        MemoryPointer.id.in_([r.pointer_id for r in rows])))}
    session.commit()
    wanted = [(row, pointer) for row in rows
              if (pointer := pointers.get(row.pointer_id)) is not None
              and pointer.sync_status not in ("pending_delete", "pending_write")]
    values = batch_gets.read_pointers(session, plane, actor, [p for _, p in wanted])
    return [StoredMessage(row, str(read.value["role"]), str(read.value["content"]))
            for (row, _), read in zip(wanted, values, strict=True)]


def list_messages(session: Session, plane: DataPlane, actor: Actor, conversation_id: str, *,
                  after: int | None = None, limit: int | None = None,
                  cursor: str | None = None,
                  access: Access = EVERYTHING) -> tuple[list[MessageOut], str | None]:
    """One page of messages in seq order, after ``after`` (or the cursor), verified."""
    with audited(session, actor, "read", detail="conversation messages",
                 private=(conversation_id,)):
        conversation_id = address_of(conversation_id).scope_ref
        size = page_limit(limit)
        start = after or 0
        if cursor is not None:
            value = decode_cursor(cursor)
            if not isinstance(value, int) or value < 0:
                raise InvalidInput("cursor is not valid; pass the next_cursor value of the "
                                   "previous page unchanged")
            start = value
        row = find(session, actor, access, conversation_id, "read")
        through = row.summarized_through
        rows = repo.messages(session, row.id, after=start, limit=size + 1)
        next_cursor = encode_cursor(rows[size - 1].seq) if len(rows) > size else None
        rows = rows[:size]
        stored = read_messages(session, plane, actor, rows)
        audit.commit_reads(session, plane, actor, [
            ("list", None, f"conversation messages after={start} -> {len(stored)}"),
            *(("read", m.row.pointer_id, f"conversation message {m.row.seq}")
              for m in stored)])
        return [MessageOut(seq=m.row.seq, role=m.role, content=m.content,  # type: ignore[arg-type]
                           tokens=m.row.tokens, pointer_id=m.row.pointer_id,
                           created_at=m.row.created_at, summarized=m.row.seq <= through)
                for m in stored], next_cursor


# -- delete, summarise on request --------------------------------------------------------------

def delete_conversation(session: Session, plane: DataPlane, actor: Actor,
                        conversation_id: str, *, access: Access = EVERYTHING) -> int:
    """Delete every message and the summary (the memories clear protocol, each audited),
    then the conversation's rows; how many memories went."""
    with audited(session, actor, "delete", detail="conversation",
                 private=(conversation_id,)):
        address = address_of(conversation_id)
        row = find(session, actor, access, address.scope_ref, "delete")
        row_id = row.id
        session.commit()
        subject = row.subject_user_id
        deleted = memories.clear_scope(session, plane, actor, address, access=access)
        # Its search index goes with its messages (DESIGN §12) ...
        search_drop.drop_empty_scopes(session, search_drop.tenant_targets(
            session, plane, actor.tenant_id), actor.tenant_id, [(address.scope, address.scope_ref)])
        begin_write(session)
        repo.delete_row(session, actor.tenant_id, row_id)
        if subject is not None and plane.credentials is not None:
            # ... and its key, renamed to the subject's keyed hash: no row names the
            # conversation, and the subject's erasure need not find it
            keys_repo.retire_scopes(session, actor.tenant_id, "conversation",
                                    [address.scope_ref], pseudonym(
                                        plane.credentials, actor.tenant_id, subject), utcnow())
        audit.record(session, actor, "delete",
                     detail=f"conversation: {deleted} messages and summaries deleted")
        session.commit()
        return deleted


def request_summary(session: Session, actor: Actor, conversation_id: str, *,
                    access: Access = EVERYTHING) -> Job:
    """Queue the conversation's summarisation now (or answer the one already queued)."""
    with audited(session, actor, "summarize", detail="conversation",
                 private=(conversation_id,)):
        conversation_id = address_of(conversation_id).scope_ref
        check_access(session, actor, access, conversation_id, "summarize")
        session.rollback()
        begin_write(session)
        row = find(session, actor, access, conversation_id, "summarize", for_update=True)
        job_id = queue_summary(session, row)
        audit.record(session, actor, "summarize", detail=f"conversation: job {job_id}")
        job = session.get(Job, job_id)
        assert job is not None
        session.commit()
        return job


__all__ = ["HashMismatch", "JOB_KIND", "SUMMARY_KEY", "add_message", "delete_conversation",
           "get_state", "list_messages", "request_summary"]
