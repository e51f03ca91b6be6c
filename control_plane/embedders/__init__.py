"""Embedders behind one interface, routed per tenant (semantic search).

An :class:`Embedder` turns texts into unit-length float32 vectors. Which one a tenant gets
is decided by :func:`~.service.embedder_for`: the OpenAI-compatible embeddings endpoint the tenant
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
    from ..plane.data_plane import DataPlane
    from ..settings import Settings

__all__ = ["SENTENCES", "EmbedderFailed", "Embedder", "Running"]


@runtime_checkable
class Embedder(Protocol):
    """Synchronous, thread-safe, called with batches of texts."""

    #: Stable identifier stored with every vector, e.g. ``memplane-hash-v2``,
    #: ``all-MiniLM-L6-v2``, ``openai:text-embedding-3-small``.
    name: str
    #: Vector length.
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``: a float32 array of shape ``(len(texts), dim)`` whose rows
        have L2 norm 1 (an empty text gets a zero row). Raises :class:`EmbedderFailed`."""
        ...


class Running(Protocol):
    """What embedder routing uses of the running server (``control_plane.runtime.Runtime``
    is one): its settings, and its data plane, whose credential box seals and opens the
    tenants' API keys. Where the functions take a bare ``Settings`` instead, the box is built
    from the server key."""

    @property
    def settings(self) -> Settings: ...

    @property
    def plane(self) -> DataPlane: ...


class EmbedderFailed(Exception):
    """The texts could not be embedded now; the caller retries later and marks nothing.

    ``code`` is a generic problem code (``timeout``, ``unreachable``, ``rate_limited``,
    ``server_error``, ``auth_failed``, ``endpoint_not_allowed``, ``malformed_answer``...);
    the message is a fixed sentence, never a remote answer.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


SENTENCES = {
    "timeout": "the embeddings endpoint did not answer in time",
    "unreachable": "the embeddings endpoint could not be reached",
    "rate_limited": "the embeddings endpoint kept answering 429 (rate limited)",
    "server_error": "the embeddings endpoint kept failing with a server error",
    "auth_failed": "the embeddings endpoint rejected the API key",
    "endpoint_refused": "the embeddings endpoint refused the request (check the base URL and "
                        "the model name)",
    "endpoint_not_allowed": "the embeddings endpoint is not allowed on this server: use a "
                            "public endpoint, or one the operator lists in "
                            "MEMPLANE_ALLOWED_ENDPOINTS (loopback, private, link-local and "
                            "metadata addresses are refused)",
    "malformed_answer": "the embeddings endpoint did not answer as an OpenAI-compatible "
                        "embeddings list",
    "credentials_unreadable": "the stored embeddings API key does not decrypt with this "
                              "server's key; configure the embedder again",
    "embedder_unavailable": "the server's embedder is not installed",
}
