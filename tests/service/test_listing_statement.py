"""A pointer listing in one statement on PostgreSQL (``memories.listing``) lists exactly the
rows the general listing (``repository.list_page``, retention terms built in Python from
the policies read first) lists, for any set of retention policies and any filters, and
appends the list's audit row in the same statement."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select, update

from control_plane.db.base import utcnow
from control_plane.db.models import AccessLog, MemoryPointer, RetentionPolicy
from control_plane.identity import ANY_REF, Access, Grant
from control_plane.memories import listing
from control_plane.memories import read as memories_read
from control_plane.memories import repository as repo
from tests.retention.helpers import backdate, put
from tests.support.service import ServiceWorld

pytestmark = pytest.mark.databases("postgres")

SCOPES = ("user", "agent")
TYPES = ("fact", "preference", "note", "event")  # a memory may be typed "event"
AGES = (0, 10, 40)  # days since the last write

_policy = st.tuples(st.sampled_from(SCOPES), st.sampled_from((*TYPES, "*")),
                    st.sampled_from((5, 30)), st.booleans())
_policies = st.lists(_policy, max_size=5, unique_by=lambda p: (p[0], p[1]))
_access = st.sampled_from([
    Access(),
    Access((Grant("user", ANY_REF),)),
    Access((Grant("agent", "a1"), Grant("user", "u2"))),
    Access(()),
])


@pytest.fixture
def stocked(world: ServiceWorld) -> ServiceWorld:
    """Every scope × memory type × age, under two refs each, with keys a LIKE would
    misread."""
    now = utcnow()
    for scope in SCOPES:
        for ref in (("u1", "u2") if scope == "user" else ("a1", "a2")):
            for memory_type in TYPES:
                for age in AGES:
                    for key in (f"k_{memory_type}%{age}", f"k{memory_type}{age}"):
                        p = put(world, scope, ref, key, memory_type=memory_type,
                                tags=[f"t{age}"])
                        backdate(world, [p.id], now - timedelta(days=age, hours=1))
    return world


def _set_policies(world: ServiceWorld, policies: list[tuple[str, str, int, bool]]) -> None:
    with world.runtime.sessions() as session:
        session.execute(delete(RetentionPolicy).where(
            RetentionPolicy.tenant_id == world.tenant_id))
        session.add_all(RetentionPolicy(tenant_id=world.tenant_id, scope_type=scope,
                                        memory_type=memory_type, retention_days=days,
                                        auto_delete=auto)
                        for scope, memory_type, days, auto in policies)
        session.commit()


def _general(world: ServiceWorld, access: Access, limit: int, **filters: Any) -> list[str]:
    with world.runtime.sessions() as session:
        rows = repo.list_page(session, world.tenant_id, scope=filters.get("scope"),
                              scope_ref=filters.get("scope_ref"), user_id=None,
                              memory_type=filters.get("memory_type"), sync_status=None,
                              after=None, limit=limit, access=access,
                              now=filters["now"], tag=filters.get("tag"),
                              key_prefix=filters.get("key_prefix"), order=filters["order"],
                              readable=filters.get("readable", False))
    return [f"{p.scope_type}/{p.scope_ref}/{p.key}" for p in rows]


def _one_statement(world: ServiceWorld, access: Access, limit: int,
                   **filters: Any) -> list[str]:
    engine = world.runtime.engine
    wanted = listing.Listing(filters.get("scope"), filters.get("scope_ref"), None,
                             filters.get("memory_type"), None, filters.get("tag"),
                             filters.get("key_prefix"), None, limit, filters["order"],
                             filters.get("readable", False))
    by = listing.ListedBy("api_key", "k", None, None, "pointers -> ", limit)
    rows, _ = listing.list_page(engine, world.tenant_id, wanted, access, filters["now"], by)
    return [f"{p.scope_type}/{p.scope_ref}/{p.key}" for p in rows]


# Two memories being written or deleted: a page of readable memories leaves them out.
IN_FLIGHT = {"user/u1/knote0": "pending_write", "agent/a2/k_fact%10": "pending_delete"}


def _mark_in_flight(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        for where, status in IN_FLIGHT.items():
            scope, ref, key = where.split("/", 2)
            session.execute(update(MemoryPointer).where(
                MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.scope_type == scope,
                MemoryPointer.scope_ref == ref, MemoryPointer.key == key
            ).values(sync_status=status))
        session.commit()


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(policies=_policies, access=_access,
       scope=st.sampled_from((None, "user", "agent")),
       memory_type=st.sampled_from((None, *TYPES)),
       tag=st.sampled_from((None, "t10", "t40")),
       key_prefix=st.sampled_from((None, "k_", "k_fact%", "kf")),
       order=st.sampled_from(repo.ORDERS), readable=st.booleans())
def test_the_statement_lists_what_the_general_listing_lists(
        stocked: ServiceWorld, policies: list[tuple[str, str, int, bool]], access: Access,
        scope: str | None, memory_type: str | None, tag: str | None,
        key_prefix: str | None, order: str, readable: bool) -> None:
    _set_policies(stocked, policies)
    _mark_in_flight(stocked)
    filters = {"scope": scope, "memory_type": memory_type, "tag": tag,
               "key_prefix": key_prefix, "now": utcnow(), "order": order,
               "readable": readable}
    expected = _general(stocked, access, 1000, **filters)
    assert _one_statement(stocked, access, 1000, **filters) == expected
    if readable:
        assert not set(expected) & set(IN_FLIGHT)
    if order in ("key", "key_desc"):  # byte by byte, as Python orders strings
        keys = [(row.split("/", 2)[2], row) for row in expected]
        assert keys == sorted(keys, key=lambda k: k[0], reverse=order == "key_desc")
    # Page by page (a cursor past the last row), the same rows in the same order.
    paged: list[str] = []
    after: repo.After | None = None
    while True:
        engine = stocked.runtime.engine
        page = listing.list_page(
            engine, stocked.tenant_id,
            listing.Listing(scope, None, None, memory_type, None, tag, key_prefix, after, 7,
                            order, readable),
            access, filters["now"], listing.ListedBy("api_key", "k", None, None, "", 7))[0]
        paged += [f"{p.scope_type}/{p.scope_ref}/{p.key}" for p in page]
        if len(page) < 7:
            break
        after = repo.After(page[-1].id, page[-1].key, page[-1].updated_at)
    assert paged == expected


@pytest.mark.parametrize("order", repo.ORDERS)
def test_every_order_pages_through_everything_once(stocked: ServiceWorld, order: str) -> None:
    # 96 rows in pages of 7; 32 rows share each last-write time (three ages), so pages by
    # last write end inside runs of equal times.
    now = utcnow()
    expected = _general(stocked, Access(), 1000, now=now, order=order)
    paged: list[str] = []
    after: repo.After | None = None
    while True:
        page, _ = listing.list_page(
            stocked.runtime.engine, stocked.tenant_id,
            listing.Listing(None, None, None, None, None, None, None, after, 7, order),
            Access(), now, listing.ListedBy("api_key", "k", None, None, "", 7))
        paged += [f"{p.scope_type}/{p.scope_ref}/{p.key}" for p in page]
        if len(page) < 7:
            break
        after = repo.After(page[-1].id, page[-1].key, page[-1].updated_at)
    assert len(expected) == 96 and paged == expected


def test_a_policy_hides_old_rows_of_its_types_and_the_list_is_audited(
        stocked: ServiceWorld) -> None:
    # Every type of user memories 30 days, facts 5: a 10-day-old fact is hidden, a 10-day-old
    # note is not, a 40-day-old note is; a policy of raw events governs no memory, not even
    # one typed "event" (the policy of every type does); agent memories are untouched.
    _set_policies(stocked, [("user", "*", 30, True), ("user", "fact", 5, True),
                            ("user", "event", 1, True)])
    with stocked.runtime.sessions() as session:
        rows, cursor = memories_read.list_pointers(
            session, stocked.actor, scope="user", scope_ref="u1", user_id=None,
            memory_type=None, sync_status=None, cursor=None, limit=100, key_prefix="k_")
    assert cursor is None
    assert sorted(p.key for p in rows) == sorted(
        ["k_fact%0", "k_preference%0", "k_preference%10", "k_note%0", "k_note%10",
         "k_event%0", "k_event%10"])
    with stocked.runtime.sessions() as session:
        details = session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == stocked.tenant_id, AccessLog.operation == "list")).all()
    assert details == [
        "pointers scope=user ref=(given) user=None tag=None prefix=(given) -> 7"]


def test_the_audit_count_is_the_page_not_the_look_ahead_row(stocked: ServiceWorld) -> None:
    with stocked.runtime.sessions() as session:
        rows, cursor = memories_read.list_pointers(
            session, stocked.actor, scope="agent", scope_ref="a1", user_id=None,
            memory_type="note", sync_status=None, cursor=None, limit=4)
        assert len(rows) == 4 and cursor is not None
        rest, end = memories_read.list_pointers(
            session, stocked.actor, scope="agent", scope_ref="a1", user_id=None,
            memory_type="note", sync_status=None, cursor=cursor, limit=4)
    assert (len(rest), end) == (2, None)  # 3 ages x 2 keys of agent/a1 notes
    assert {p.id for p in rows}.isdisjoint(p.id for p in rest)
    with stocked.runtime.sessions() as session:
        details = session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == stocked.tenant_id, AccessLog.operation == "list")
            .order_by(AccessLog.id)).all()
    assert [d.rsplit(" ", 1)[1] for d in details] == ["4", "2"]
