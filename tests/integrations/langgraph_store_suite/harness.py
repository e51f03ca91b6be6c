"""The stand-ins that let LangGraph's own SqliteStore tests run against ``MemplaneStore`` on
a live memplane server: ``SqliteStore.from_conn_string(...)`` (and the async one) yield a
``MemplaneStore`` over a fresh tenant's agent key on the stack under test, with the same
``ttl`` config; with an ``index`` config, semantic search is on (the server embeds; the
test's embedder is not used), without one it is off, as SqliteStore embeds nothing then.
``setup()`` has nothing to do; ``sweep_ttl()`` deletes nothing and answers 0 (expired items
read as missing at once; the server's retention run deletes them). The SQLite store's
internals (its glob escaping, its SQL, its migrations) have no counterpart: they raise.

``CharacterEmbeddings`` is LangGraph's test embedder, verbatim from
libs/checkpoint-sqlite/tests/test_store.py (MIT License, Copyright (c) 2024 LangChain, Inc.).
"""

from __future__ import annotations

import math
import os
import random
import tempfile
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Generator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Literal

from langchain_core.embeddings import Embeddings

import memplane
from memplane.integrations.langgraph import MemplaneStore
from tests.support.service import Stack

LIVE: dict[str, Stack] = {}  # the stack of the running test (the suite's autouse fixture)


class Store(MemplaneStore):
    """MemplaneStore with the two SqliteStore methods the tests call."""

    def setup(self) -> None:
        """Nothing to create: the server owns its schema."""

    def sweep_ttl(self) -> int:
        return 0



class AsyncStore(MemplaneStore):
    """MemplaneStore with AsyncSqliteStore's two coroutine methods the tests await."""

    async def setup(self) -> None:
        """Nothing to create: the server owns its schema."""

    async def sweep_ttl(self) -> int:
        return 0


def _clients() -> tuple[memplane.Client, memplane.AsyncClient]:
    stack = LIVE["stack"]
    key = stack.new_tenant().key("agent")
    return memplane.Client(stack.base_url, key), memplane.AsyncClient(stack.base_url, key)


class SqliteStore:
    @staticmethod
    @contextmanager
    def from_conn_string(conn_string: str, *, ttl: Any = None, index: Any = None,
                         **_: Any) -> Iterator[Store]:
        client, aclient = _clients()
        with client:
            yield Store(client, aclient=aclient, ttl=ttl, semantic=index is not None)


class AsyncSqliteStore:
    @staticmethod
    @asynccontextmanager
    async def from_conn_string(conn_string: str, *, ttl: Any = None, index: Any = None,
                               **_: Any) -> AsyncIterator[Store]:
        client, aclient = _clients()
        async with aclient:
            with client:
                yield AsyncStore(client, aclient=aclient, ttl=ttl, semantic=index is not None)


def _internal(*_: Any, **__: Any) -> Any:
    raise NotImplementedError("a SqliteStore internal: MemplaneStore has no SQL of its own")


_escape_glob_literal = _namespace_match_pattern = BaseSqliteStore = _internal
NS_MATCH_FUNCTION = "ns_match"
SqliteIndexConfig = dict


class CharacterEmbeddings(Embeddings):
    """Simple character-frequency based embeddings using random projections."""

    def __init__(self, dims: int = 50, seed: int = 42):
        """Initialize with embedding dimensions and random seed."""
        self._rng = random.Random(seed)
        self.dims = dims
        # Create projection vector for each character lazily
        self._char_projections: dict[str, list[float]] = defaultdict(
            lambda: [
                self._rng.gauss(0, 1 / math.sqrt(self.dims)) for _ in range(self.dims)
            ]
        )

    def _embed_one(self, text: str) -> list[float]:
        """Embed a single text."""
        counts = Counter(text)
        total = sum(counts.values())

        if total == 0:
            return [0.0] * self.dims

        embedding = [0.0] * self.dims
        for char, count in counts.items():
            weight = count / total
            char_proj = self._char_projections[char]
            for i, proj in enumerate(char_proj):
                embedding[i] += weight * proj

        norm = math.sqrt(sum(x * x for x in embedding))
        if norm > 0:
            embedding = [x / norm for x in embedding]

        return embedding

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed a list of documents."""
        return [self._embed_one(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed a query string."""
        return self._embed_one(text)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CharacterEmbeddings) and self.dims == other.dims



# From the same file, verbatim: the vector store factory (it opens the SqliteStore above).
VECTOR_TYPES = ["cosine"]  # SQLite only supports cosine similarity


@contextmanager
def create_vector_store(
    fake_embeddings: CharacterEmbeddings,
    text_fields: list[str] | None = None,
    distance_type: str = "cosine",
    conn_type: Literal["memory", "file"] = "memory",
) -> Generator[SqliteStore, None, None]:
    """Create a SqliteStore with vector search enabled."""
    index_config: SqliteIndexConfig = {
        "dims": fake_embeddings.dims,
        "embed": fake_embeddings,
        "text_fields": text_fields,
        "distance_type": distance_type,  # This is for API consistency but SQLite only supports cosine  # noqa: E501
    }
    if conn_type == "memory":
        conn_str = ":memory:"
    else:
        temp_file = tempfile.NamedTemporaryFile(delete=False)
        temp_file.close()
        conn_str = temp_file.name

    try:
        with SqliteStore.from_conn_string(conn_str, index=index_config) as store:
            store.setup()
            yield store
    finally:
        if conn_type == "file":
            os.unlink(conn_str)


