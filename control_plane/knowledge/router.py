from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Path, Query

from ..deps import PlaneDep, ReaderCaller, SessionDep, WriterCaller
from ..idempotency import Idempotency
from ..kit import PLAIN_TEXT
from . import service as knowledge
from .schemas import DocumentDeleted, DocumentPage, KnowledgeAdded, KnowledgeIn

router = APIRouter(tags=["knowledge"])

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key")]


@router.post("/v1/knowledge", response_model=KnowledgeAdded, status_code=201)
def add_knowledge(body: KnowledgeIn, caller: WriterCaller, session: SessionDep,
                  plane: PlaneDep, idempotency_key: IdempotencyKey = None) -> KnowledgeAdded:
    """Add documents an agent retrieves through search (addKnowledge): each gets an id, is
    cut into chunks of at most 800 characters (100 characters of overlap) and every chunk is
    stored, encrypted, as the memory agent/<agent_id>/knowledge/<document_id>/<0000…> of
    memory type `knowledge`. Up to 20 documents of up to 200,000 characters. Send an
    `Idempotency-Key` header to make retries safe (a retry completes a partial add)."""
    idem = Idempotency.of(idempotency_key, "POST", "/v1/knowledge", body.model_dump_json())
    return knowledge.add(session, plane, caller.actor, body, idem, access=caller.access)


@router.get("/v1/knowledge", response_model=DocumentPage)
def list_knowledge(caller: ReaderCaller, session: SessionDep,
                   agent_id: Annotated[str, Query(min_length=1, max_length=256,
                                                  pattern=PLAIN_TEXT,
                                                  description="The agent whose documents "
                                                              "to list.")],
                   limit: Annotated[int | None, Query(ge=1, le=1000, description="Page "
                                                      "size, 1 to 1000 (default 100).")]
                   = None,
                   cursor: Annotated[str | None, Query(description="The next_cursor of "
                                                       "the previous page.")]
                   = None
                   ) -> DocumentPage:
    """The agent's knowledge documents (id, title, chunk count, stored size, when added),
    in id order; paginated with `cursor`."""
    return knowledge.list_documents(session, caller.actor, agent_id, cursor=cursor,
                                    limit=limit, access=caller.access)


DocumentId = Annotated[str, Path(description="The document's id (doc_…).")]


@router.delete("/v1/knowledge/{document_id}", response_model=DocumentDeleted)
def delete_knowledge(document_id: DocumentId, caller: WriterCaller, session: SessionDep,
                     plane: PlaneDep) -> DocumentDeleted:
    """Delete a document: all its chunks (memories and their objects)."""
    return knowledge.delete_document(session, plane, caller.actor, document_id,
                                     access=caller.access)
