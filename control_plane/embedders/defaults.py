"""The server's default embedders (``MEMPLANE_EMBEDDER``), one shared instance of each per
process."""

from __future__ import annotations

import threading

from . import Embedder

_DEFAULTS: dict[str, Embedder] = {}
_DEFAULTS_LOCK = threading.Lock()


def default_embedder(kind: str) -> Embedder:
    """The server's default embedder (``MEMPLANE_EMBEDDER``): one shared instance per
    process, so the sentence model is loaded once."""
    with _DEFAULTS_LOCK:
        embedder = _DEFAULTS.get(kind)
        if embedder is None:
            if kind == "semantic":
                from .semantic import SemanticEmbedder

                embedder = SemanticEmbedder()
            elif kind == "hash":
                from .hashing import HashingEmbedder

                embedder = HashingEmbedder()
            else:
                raise ValueError(f"unknown embedder {kind!r}; use 'hash' or 'semantic'")
            _DEFAULTS[kind] = embedder
        return embedder
