"""A page of memories is a prepared statement PostgreSQL plans once (migration 0052): on a
table whose first ANALYZE saw one scope ref, grown since by thousands of memories in many
refs, the listing of one ref settles on the generic plan after its first executions instead
of being planned again for each call's values."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import Engine, text

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db import direct
from control_plane.db.base import utcnow
from control_plane.db.migrate import alembic_config, upgrade
from control_plane.identity import Access, Actor
from control_plane.memories import listing
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.tenants.service import create_tenant
from tests.support.grown import grow

pytestmark = pytest.mark.databases("postgres")


_PLANS = text("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
              "WHERE statement LIKE '%WITH page AS%'")




def test_a_listing_keeps_one_plan_on_a_table_grown_since_its_first_analyze(
        own_runtime: Runtime) -> None:
    with own_runtime.sessions() as session:
        tenant = create_tenant(session, "plans")[0].id
        actor = Actor(tenant, "api", "test")
        for i in range(64):  # the first rows: one user's
            memories.set_value(session, own_runtime.plane, actor,
                               MemoryAddress.parse(Scope.user, "first", f"k{i}"), i,
                               MemoryMeta())
    with own_runtime.engine.connect() as conn:
        conn.execute(text("ANALYZE memory_pointers"))
        grow(conn, 3000, scope_type="'conversation'", scope_ref="'thread-' || (n / 10)",
             key="'c/' || lpad(n::text, 6, '0')")
        conn.commit()

    wanted = listing.Listing(scope="conversation", scope_ref="thread-3", user_id=None,
                             memory_type=None, sync_status=None, tag=None, key_prefix="c/",
                             after=None, limit=5, order="key_desc", readable=True)
    by = listing.ListedBy("api_key", "k", None, None, "listed ", 4)
    for _ in range(15):  # one thread: the pool hands it the same connection each time
        rows, _keys = listing.list_page(own_runtime.engine, tenant, wanted, Access(), utcnow(),
                                        by)
        assert [row.key for row in rows] == ["c/000039", "c/000038", "c/000037",
                                             "c/000036", "c/000035"]
    raw = direct.pooled_raw(own_runtime.engine)
    try:
        with raw.driver_connection.cursor() as cursor:
            cursor.execute(_PLANS.text)
            plans = cursor.fetchall()
    finally:
        raw.close()
    # psycopg prepares the statement at its fifth execution; PostgreSQL plans the first five
    # executions of a prepared statement for their values, then keeps the generic plan.
    assert plans == [(5, 5)]


_ANALYZED = text("SELECT last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL "
                 "FROM pg_stat_user_tables WHERE relname = 'memory_pointers'")
_SCOPE_REF_OPTIONS = text("SELECT attoptions FROM pg_attribute WHERE attname = 'scope_ref' "
                          "AND attrelid = 'memory_pointers'::regclass")


def _analyzed(engine: Engine) -> bool:
    with engine.connect() as conn:  # a new session: the statistics as they are now
        return bool(conn.execute(_ANALYZED).scalar())


def test_the_migration_analyzes_a_table_that_holds_memories_and_leaves_an_empty_one(
        own_runtime: Runtime) -> None:
    engine = own_runtime.engine
    assert _analyzed(engine) is False  # a new deployment: the sealer analyzes it later
    with engine.connect() as conn:
        assert conn.execute(_SCOPE_REF_OPTIONS).scalar() == ["n_distinct=-0.05"]
    with own_runtime.sessions() as session:
        tenant = create_tenant(session, "upgraded")[0].id
        for i in range(3):
            memories.set_value(session, own_runtime.plane, Actor(tenant, "api", "test"),
                               MemoryAddress.parse(Scope.user, "u", f"k{i}"), i, MemoryMeta())
    assert _analyzed(engine) is False

    # A deployment that stored memories before this migration, upgraded now.
    config = alembic_config(engine)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0052_scope_refs_are_many-1")
    with engine.connect() as conn:
        assert conn.execute(_SCOPE_REF_OPTIONS).scalar() is None
    upgrade(engine)

    assert _analyzed(engine) is True
    with engine.connect() as conn:
        assert conn.execute(_SCOPE_REF_OPTIONS).scalar() == ["n_distinct=-0.05"]
