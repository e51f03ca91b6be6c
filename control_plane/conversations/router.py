from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import unquote

from fastapi import APIRouter, Depends, Header, Path, Query, Response
from fastapi.responses import JSONResponse

from ..deps import PlaneDep, ReaderCaller, SessionDep, WriterCaller
from ..idempotency import Idempotency, Replay
from ..jobs.schemas import JobOut
from ..search.router import searching
from ..search.service import Searching
from . import context as contexts
from . import service as conversations
from .schemas import ContextIn, ContextOut, ConversationOut, MessageAdded, MessageIn, MessagePage

router = APIRouter(tags=["conversations"])

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key")]
ConversationId = Annotated[str, Path(description="Your id for the conversation (1–255 "
                                     "characters, one path segment once encoded).")]
RuntimeDep = Annotated[Searching, Depends(searching)]


def _id(conversation_id: str) -> str:
    return unquote(conversation_id)  # "%2F" arrives still encoded (see app.EncodedSlashes)


@router.post("/v1/conversations/{conversation_id}/messages", response_model=MessageAdded,
             status_code=201)
def add_message(conversation_id: ConversationId, body: MessageIn, caller: WriterCaller,
                session: SessionDep, plane: PlaneDep, runtime: RuntimeDep,
                idempotency_key: IdempotencyKey = None) -> Any:
    """Add a message (created with the conversation on its first message): its text goes
    (encrypted) to the tenant's bucket as a keyed memory of scope `conversation`, key
    `m/<seq>`, the conversation's user as data subject; the control plane counts its tokens
    with the model's tokenizer and turns `needs_summarization` on at MEMPLANE_SUMMARIZE_AT ×
    the limit (a summarisation job is queued then). Send an `Idempotency-Key` header to make
    retries safe."""
    idem = Idempotency.of(idempotency_key, "POST", f"/v1/conversations/{_id(conversation_id)}"
                          "/messages", body.model_dump_json())
    result = conversations.add_message(session, plane, runtime.settings, caller.actor,
                                       _id(conversation_id), body, access=caller.access,
                                       idem=idem)
    if isinstance(result, Replay):
        return JSONResponse(result.response, status_code=result.status_code,
                            headers={"Idempotent-Replayed": "true"})
    return result


@router.get("/v1/conversations/{conversation_id}", response_model=ConversationOut)
def get_conversation(conversation_id: ConversationId, caller: ReaderCaller,
                     session: SessionDep, runtime: RuntimeDep) -> ConversationOut:
    """The conversation's state: token usage against its limit, `needs_summarization`, the
    summary's pointer and the last message it covers. Metadata only."""
    return conversations.get_state(session, runtime.settings, caller.actor,
                                   _id(conversation_id), access=caller.access)


@router.get("/v1/conversations/{conversation_id}/messages", response_model=MessagePage)
def list_messages(conversation_id: ConversationId, caller: ReaderCaller, session: SessionDep,
                  plane: PlaneDep,
                  after: Annotated[int | None, Query(ge=0, le=2**31 - 1, description="Only "
                                                     "messages after this seq.")] = None,
                  limit: Annotated[int | None, Query(ge=1, le=1000)] = None,
                  cursor: str | None = None) -> MessagePage:
    """Messages in seq order, each read from the bucket and verified against its SHA-256;
    `summarized` says whether the summary covers it."""
    items, next_cursor = conversations.list_messages(
        session, plane, caller.actor, _id(conversation_id), after=after, limit=limit,
        cursor=cursor, access=caller.access)
    return MessagePage(items=items, next_cursor=next_cursor)


@router.delete("/v1/conversations/{conversation_id}", status_code=204)
def delete_conversation(conversation_id: ConversationId, caller: WriterCaller,
                        session: SessionDep, plane: PlaneDep) -> Response:
    """Delete the conversation: every message and its summary from the bucket, then its
    rows; 204."""
    conversations.delete_conversation(session, plane, caller.actor, _id(conversation_id),
                                      access=caller.access)
    return Response(status_code=204)


@router.post("/v1/conversations/{conversation_id}/summarize", response_model=JobOut,
             status_code=202)
def summarize(conversation_id: ConversationId, caller: WriterCaller,
              session: SessionDep) -> Any:
    """Summarise the conversation's older messages now: a job (202; the one already queued
    if there is one) whose result says how many messages the summary took in."""
    return conversations.request_summary(session, caller.actor, _id(conversation_id),
                                         access=caller.access)


@router.post("/v1/conversations/{conversation_id}/context", response_model=ContextOut)
def assemble_context(conversation_id: ConversationId, body: ContextIn, caller: WriterCaller,
                     session: SessionDep, plane: PlaneDep, runtime: RuntimeDep) -> ContextOut:
    """Assemble the context window for the next model call within `token_budget`: system
    prompt and current message (always), relevant memories, entries and uncompressed events
    of `memory_scopes`, the latest messages, then the summary of older ones — with a report
    of every candidate included, summarized or dropped, and why."""
    return contexts.assemble(session, plane, runtime.settings, caller.actor,
                             _id(conversation_id), body, access=caller.access,
                             search=contexts.semantic_search(runtime))
