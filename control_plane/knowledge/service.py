"""Knowledge documents (the seed's addKnowledge): each document is cut into chunks
(chunking.py) and every chunk is stored as a keyed memory through the memories write path —
so encryption, the audit row of every write, idempotency, export and erasure all apply as to
any memory:

  scope ``agent``, scope_ref = the agent id, memory_type ``knowledge``,
  key ``knowledge/<document_id>/<chunk_index:04d>``, title = the document's title,
  value ``{"document_id", "title", "chunk_index", "chunk_count", "content", "metadata"}``.

Search embeds every keyed memory after its commit (title + ``value["content"]``), so a
document is retrieved through ``POST /v1/search`` like any memory.

Retries: with an ``Idempotency-Key``, document ids and every chunk's write are derived from
the key, so a retry after a failure part-way writes only the chunks still missing and
answers as the first complete run would; a retry after success writes nothing. Without a key,
a failure part-way leaves the chunks already written (listed, deletable with the document).

Documents have no data subject (no user_id): a user's erasure leaves them alone.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..addresses import MemoryAddress, Scope
from ..audit import service as audit
from ..audit.service import audited
from ..db.engine import begin_write
from ..db.models import MemoryPointer
from ..dlp.guard import screen_fields
from ..errors import InvalidInput, NotFound
from ..idempotency import Idempotency
from ..identity import EVERYTHING, Access, Actor
from ..kit import MAX_PAGE, decode_cursor, encode_cursor, sha256_hex
from ..memories import service as memories
from ..memories.schemas import MemoryMeta
from ..plane.data_plane import DataPlane
from .chunking import chunk
from .schemas import (
    DOCUMENT_ID,
    DocumentAdded,
    DocumentDeleted,
    DocumentOut,
    DocumentPage,
    KnowledgeAdded,
    KnowledgeIn,
)

MEMORY_TYPE = "knowledge"
KEY_PREFIX = "knowledge/"
DEFAULT_PAGE = 100
# key = "knowledge/" + "doc_" + 24 hex + "/" + 4 digits: the document id is characters 11-38
_DOC_START, _DOC_LENGTH = len(KEY_PREFIX) + 1, 28


def chunk_key(document_id: str, index: int) -> str:
    return f"{KEY_PREFIX}{document_id}/{index:04d}"


def _document_id(actor: Actor, idem: Idempotency | None, position: int) -> str:
    if idem is None:
        return f"doc_{secrets.token_hex(12)}"
    return "doc_" + sha256_hex(f"{actor.tenant_id} {idem.key} {position}".encode())[:24]


def _chunk_idem(idem: Idempotency | None, key: str) -> Idempotency | None:
    if idem is None:
        return None
    return Idempotency(key=f"knowledge {sha256_hex(idem.key.encode())} {key}",
                       fingerprint=sha256_hex(f"{idem.fingerprint} {key}".encode()))


def add(session: Session, plane: DataPlane, actor: Actor, body: KnowledgeIn,
        idem: Idempotency | None, *, access: Access = EVERYTHING) -> KnowledgeAdded:
    """Chunk and store every document; the answer names each document's id and chunks."""
    added: list[DocumentAdded] = []
    with audited(session, actor, "knowledge_add", detail=f"{len(body.documents)} documents"):
        if not access.allows("agent", body.agent_id):
            # the answer a write to that scope gets, audited like it
            memories.ensure_in_scope(session, actor, access,
                                     MemoryAddress.parse(Scope.agent, body.agent_id),
                                     "knowledge_add")
        body = body.model_copy(update={"documents": [  # all screened before any is stored
            screen_fields(session, actor, d, ("title", "content", "metadata"),
                          what=f"document {i + 1}") for i, d in enumerate(body.documents)]})
        for position, document in enumerate(body.documents):
            document_id = _document_id(actor, idem, position)
            pieces = chunk(document.content)
            meta = MemoryMeta(memory_type=MEMORY_TYPE, title=document.title,
                              agent_id=body.agent_id)
            for index, text in enumerate(pieces):
                key = chunk_key(document_id, index)
                value: dict[str, Any] = {
                    "document_id": document_id, "title": document.title,
                    "chunk_index": index, "chunk_count": len(pieces), "content": text,
                    "metadata": document.metadata}
                memories.set_value(session, plane, actor,
                                   MemoryAddress.parse(Scope.agent, body.agent_id, key),
                                   value, meta, _chunk_idem(idem, key), access=access)
            added.append(DocumentAdded(document_id=document_id, title=document.title,
                                       chunk_count=len(pieces),
                                       characters=len(document.content)))
        session.commit()
        begin_write(session)
        audit.record(session, actor, "knowledge_add", detail="documents " + ", ".join(
            f"{d.document_id} ({d.chunk_count} chunks)" for d in added))
        session.commit()
    return KnowledgeAdded(agent_id=body.agent_id, documents=added)


def _mine(actor: Actor, access: Access) -> list[Any]:
    conditions: list[Any] = [
        MemoryPointer.tenant_id == actor.tenant_id, MemoryPointer.scope_type == "agent",
        MemoryPointer.memory_type == MEMORY_TYPE,
        MemoryPointer.key.startswith(f"{KEY_PREFIX}doc_", autoescape=True),
        MemoryPointer.sync_status != "pending_delete"]
    visible = access.where(MemoryPointer.scope_type, MemoryPointer.scope_ref,
                           MemoryPointer.subject_user_id)
    if visible is not None:
        conditions.append(visible)
    return conditions


def list_documents(session: Session, actor: Actor, agent_id: str, *, cursor: str | None,
                   limit: int | None, access: Access = EVERYTHING) -> DocumentPage:
    """The agent's documents in id order, one row each (from the chunks' pointers)."""
    with audited(session, actor, "knowledge_list"):
        after = _after(cursor)
        size = min(limit or DEFAULT_PAGE, MAX_PAGE)
        document = func.substr(MemoryPointer.key, _DOC_START, _DOC_LENGTH)
        query = (select(document.label("document_id"), func.max(MemoryPointer.title),
                        func.count(), func.sum(MemoryPointer.content_size),
                        func.min(MemoryPointer.created_at))
                 .where(*_mine(actor, access), MemoryPointer.scope_ref == agent_id)
                 .group_by(document).order_by(document).limit(size + 1))
        if after is not None:
            query = query.where(document > after)
        rows = session.execute(query).all()
        items = [DocumentOut(document_id=row[0], title=row[1], chunk_count=int(row[2]),
                             size=int(row[3] or 0), created_at=row[4])
                 for row in rows[:size]]
        session.commit()
        begin_write(session)
        audit.record(session, actor, "knowledge_list", detail=f"{len(items)} documents")
        session.commit()
    return DocumentPage(items=items,
                        next_cursor=(encode_cursor(items[-1].document_id)
                                     if len(rows) > size else None))


def _after(cursor: str | None) -> str | None:
    """The document id a cursor this server wrote holds; anything else is a 422."""
    if cursor is None:
        return None
    value = decode_cursor(cursor)
    if not isinstance(value, str) or not re.fullmatch(DOCUMENT_ID, value):
        raise InvalidInput("cursor is not valid; pass the next_cursor value of the previous "
                           "page unchanged")
    return value


def delete_document(session: Session, plane: DataPlane, actor: Actor, document_id: str, *,
                    access: Access = EVERYTHING) -> DocumentDeleted:
    """Delete every chunk of the document (each audited as a memory delete), then record
    the document's deletion."""
    valid = re.fullmatch(DOCUMENT_ID, document_id) is not None
    with audited(session, actor, "knowledge_delete",
                 detail=f"document {document_id}" if valid else "document (invalid id)"):
        check_document_id(document_id)
        rows = session.execute(
            select(MemoryPointer.scope_ref, MemoryPointer.key)
            .where(*_mine(actor, access),
                   MemoryPointer.key.startswith(f"{KEY_PREFIX}{document_id}/",
                                                autoescape=True))
            .order_by(MemoryPointer.key)).all()
        if not rows:
            raise NotFound(f"no knowledge document {document_id}")
        for scope_ref, key in rows:
            try:
                memories.delete_value(session, plane, actor,
                                      MemoryAddress.parse(Scope.agent, scope_ref, key),
                                      access=access)
            except NotFound:
                pass  # deleted meanwhile: what we wanted
        session.commit()
        begin_write(session)
        audit.record(session, actor, "knowledge_delete",
                     detail=f"document {document_id} ({len(rows)} chunks)")
        session.commit()
    return DocumentDeleted(document_id=document_id, deleted_chunks=len(rows))


def check_document_id(document_id: str) -> str:
    if not re.fullmatch(DOCUMENT_ID, document_id):
        raise InvalidInput("document_id must look like 'doc_' followed by 24 lower-case hex "
                           "digits, as POST /v1/knowledge answered")
    return document_id

