"""Fixtures of LangGraph's SqliteStore tests, on memplane's live stacks (SQLite and
PostgreSQL control planes), and the table of the tests that differ by design: each is marked
``xfail(strict=True)``, so a test that starts passing (or a passing one that starts failing)
is noticed. The README's LangGraph section explains each."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Generator, Iterator

import pytest

from tests.support.service import Stack, Tenant

from .harness import LIVE, CharacterEmbeddings, Store

INTERNAL = ("a SqliteStore internal (its SQL, glob escaping or migrations): MemplaneStore "
            "writes no SQL of its own")
EMBEDDED = ("the server embeds values with the tenant's embedder, in the background after "
            "the write; the test's embedder is not used, so right after a put the ranking "
            "and scores are not the test's (not yet embedded items fill the page newest "
            "first, unscored)")
SWEPT = ("no client-side sweeper: an expired item reads as missing at once and the server's "
         "retention run deletes it; sweep_ttl() deletes nothing and answers 0")
DIFFERS: dict[str, str] = {
    "test_escape_glob_literal": INTERNAL,
    "test_namespace_match_pattern": INTERNAL,
    "test_list_namespaces_prefix_uses_indexable_condition": INTERNAL,
    "test_nonnull_migrations": INTERNAL,
    "test_sql_injection_vulnerability": (
        "filters are evaluated on the client, never in SQL: any filter key is a literal "
        "JSON key (as in PostgresStore), so none is refused as 'Invalid filter key'"),
    "test_vector_store_initialization": (
        "asserts SqliteStore's index_config and embeddings attributes: the embedder is the "
        "server's"),
    "test_vector_update_with_embedding": EMBEDDED,
    "test_vector_search_with_filters": EMBEDDED,
    "test_vector_search_pagination": EMBEDDED,
    "test_embed_with_path": EMBEDDED,
    "test_embed_with_path_operation_config": EMBEDDED,
    "test_scores": EMBEDDED,
    "test_non_ascii": EMBEDDED,
    "test_ttl_refresh": SWEPT,
    "test_ttl_sweeper": SWEPT,
    "test_async_ttl_sweeper": SWEPT,
}


@pytest.fixture(autouse=True)
def _live(stack: Stack) -> Iterator[None]:
    LIVE["stack"] = stack
    yield
    LIVE.pop("stack", None)


@pytest.fixture
def store(tenant: Tenant) -> Iterator[Store]:
    """LangGraph's ``store`` fixture (a fresh SqliteStore): a fresh tenant's MemplaneStore."""
    with tenant.stack.client(tenant.key("agent")) as client:
        yield Store(client, semantic=False)


@pytest.fixture
def fake_embeddings() -> CharacterEmbeddings:
    return CharacterEmbeddings(dims=500)


@pytest.fixture
def temp_db_file() -> Generator[str, None, None]:
    fd, path = tempfile.mkstemp()
    os.close(fd)
    yield path
    os.unlink(path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name != "langgraph_store_suite":
            continue
        name = getattr(item, "originalname", item.name).split("[")[0]
        if name in DIFFERS:
            item.add_marker(pytest.mark.xfail(strict=True, reason=DIFFERS[name]))
        if item.path.name == "test_ttl.py":
            item.add_marker(pytest.mark.slow)  # they sleep for their TTLs to run out
