"""The pointer listing of ``memories/read.py`` through the services, on SQLite and PostgreSQL:
every order pages through each memory once and ends without a cursor; the audit row counts
the page (not the look-ahead row) and goes to the read group commit where one is given; ids
are compared in NFC; a cursor of another order or of the wrong shape is refused with the
sentence that says what to pass."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import AccessLog
from control_plane.errors import InvalidInput
from control_plane.kit import encode_cursor
from control_plane.memories import read
from control_plane.memories import service as memories
from control_plane.memories.repository import ORDERS
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld

KEYS = ["k-b", "k-d", "k-a", "k-c"]  # written in this order
FOR_THIS_ORDER = ("cursor is not valid for this order; pass the next_cursor value of the "
                  "previous page, listed in the same order, unchanged")


class Recorder:
    """A read group commit that keeps what it was given."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str]] = []

    def record(self, tenant_id: object, accessor_type: str, accessor_id: str, operation: str,
               *, pointer_id: object = None, detail: str = "", timeout: float = 30,
               agent_id: str | None = None) -> None:
        self.rows.append((operation, detail))

    def record_many(self, tenant_id: object, accessor_type: str, accessor_id: str,
                    operation: str, rows: list[tuple[object, str]], *,
                    agent_id: str | None = None) -> None:
        raise AssertionError("a listing records one row")


def _stock(world: ServiceWorld, ref: str = "u-list") -> None:
    for key in KEYS:
        with world.runtime.sessions() as session:
            memories.set_value(session, world.runtime.plane, world.actor,
                               MemoryAddress.parse(Scope.user, ref, key), {"k": key},
                               MemoryMeta())


def _page(world: ServiceWorld, cursor: str | None, order: str, limit: int = 2,
          batcher: Any = None, **filters: Any) -> tuple[list[str], str | None]:
    args: dict[str, Any] = {"scope": "user", "scope_ref": "u-list", "user_id": None,
                            "memory_type": None, "sync_status": None, **filters}
    with world.runtime.sessions() as session:
        rows, after = read.list_pointers(session, world.actor, cursor=cursor, limit=limit,
                                         order=order, batcher=batcher, **args)
    return [str(p.key) for p in rows], after


def _list_rows(world: ServiceWorld) -> list[str]:
    with world.runtime.sessions() as session:
        return list(session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "list")))


def _postgres(world: ServiceWorld) -> bool:
    return world.runtime.engine.dialect.name == "postgresql"


@pytest.mark.parametrize("order", ORDERS)
def test_every_order_pages_through_each_memory_once_and_ends_without_a_cursor(
        world: ServiceWorld, order: str) -> None:
    _stock(world)
    pages: list[list[str]] = []
    cursors: list[str | None] = []
    cursor: str | None = None
    while True:
        keys, cursor = _page(world, cursor, order)
        pages.append(keys)
        cursors.append(cursor)
        if cursor is None or len(pages) > 4:
            break
    listed = [k for page in pages for k in page]
    expected = {"created": KEYS, "key": sorted(KEYS), "key_desc": sorted(KEYS, reverse=True),
                "updated_desc": KEYS[::-1]}[order]
    assert listed == expected
    assert [len(p) for p in pages] == [2, 2]
    assert cursors[0] is not None and cursors[1] is None
    assert _list_rows(world) == ["pointers scope=user ref=(given) user=None tag=None "
                                 "prefix=None -> 2"] * 2


def test_a_listing_goes_to_the_read_group_commit_where_one_is_given(world: ServiceWorld) -> None:
    _stock(world)
    recorder = Recorder()
    keys, _ = _page(world, None, "key", limit=3, batcher=recorder, key_prefix="k-")
    assert keys == ["k-a", "k-b", "k-c"]
    detail = "pointers scope=user ref=(given) user=None tag=None prefix=(given) -> 3"
    if _postgres(world):  # the page's own statement writes its row
        assert (recorder.rows, _list_rows(world)) == ([], [detail])
    else:
        assert (recorder.rows, _list_rows(world)) == ([("list", detail)], [])


def test_a_page_of_readable_pointers_says_so_in_its_row(world: ServiceWorld) -> None:
    _stock(world)
    with world.runtime.sessions() as session:
        page = read.page_of_pointers(
            session, world.actor, scope="user", scope_ref="u-list", user_id=None,
            memory_type=None, sync_status=None, cursor=None, limit=10, access=read.EVERYTHING,
            tag=None, key_prefix=None, batcher=None, order="key", readable=True)
    assert [p.key for p in page.pointers] == sorted(KEYS)
    assert page.next_cursor is None
    assert page.reads_logged is _postgres(world)
    assert _list_rows(world) == ["pointers with values scope=user ref=(given) user=None "
                                 "tag=None prefix=None -> 4"]


def test_ids_and_prefixes_given_decomposed_find_what_was_stored_composed(
        world: ServiceWorld) -> None:
    _stock(world, ref="caf\u00e9")
    keys, _ = _page(world, None, "key", limit=10, scope_ref="cafe\u0301",
                    key_prefix="k-")
    assert keys == sorted(KEYS)


@pytest.mark.parametrize(("order", "value"), [
    ("key", [1, str(uuid.uuid4())]),  # a key that is no string
    ("key", ["k-a", "not-an-id"]),
    ("key", 5),  # not a pair at all
    ("key", ["w", "2026-12-05T00:00:00+00:00", str(uuid.uuid4())]),  # another order's
    ("key_desc", ["k-a"]),
    ("updated_desc", ["x", "2026-12-05T00:00:00+00:00", str(uuid.uuid4())]),  # wrong mark
    ("updated_desc", ["w", 5, str(uuid.uuid4())]),  # a time that is no string
    ("updated_desc", ["w", "yesterday", str(uuid.uuid4())]),
    ("updated_desc", ["k-a", str(uuid.uuid4())]),  # a listing by key's
])
def test_a_cursor_of_another_order_or_shape_is_refused(world: ServiceWorld, order: str,
                                                       value: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        _page(world, encode_cursor(value), order)
    assert caught.value.detail == FOR_THIS_ORDER
    assert _list_rows(world) == []


def test_a_listing_by_creation_refuses_a_cursor_that_is_no_id(world: ServiceWorld) -> None:
    with pytest.raises(InvalidInput) as caught:
        _page(world, encode_cursor(["k-a", str(uuid.uuid4())]), "created")
    assert caught.value.detail == ("cursor is not valid; pass the next_cursor value of the "
                                   "previous page unchanged")
