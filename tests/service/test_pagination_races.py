"""Pointer cursor pagination while other writers insert, overwrite and delete, and while a
write whose pointer id was minted before the walk began commits in the middle of it.

A walk never shows a row twice, and never misses a memory that existed from its first page
to its last (by address: an overwrite must not move a memory across the cursor).
"""

from __future__ import annotations

import threading
from collections import Counter

from control_plane.addresses import MemoryAddress, Scope
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld

WAIT = 60
META = MemoryMeta()


def _address(n: int) -> MemoryAddress:
    return MemoryAddress.parse(Scope.user, f"u{n:03d}", "note")


def _set(world: ServiceWorld, n: int, value: str) -> None:
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, _address(n), value, META)


def _delete(world: ServiceWorld, n: int) -> None:
    with world.runtime.sessions() as session:
        memories.delete_value(session, world.runtime.plane, world.actor, _address(n))


def _page(world: ServiceWorld, cursor: str | None) -> tuple[list[tuple[str, str]], str | None]:
    with world.runtime.sessions() as session:
        rows, nxt = memories.list_pointers(session, world.actor, scope=None, scope_ref=None,
                                           user_id=None, memory_type=None, sync_status=None,
                                           cursor=cursor, limit=3)
    return [(str(r.id), r.scope_ref) for r in rows], nxt


def test_a_walk_under_inserts_overwrites_deletes_and_a_late_commit_skips_and_repeats_nothing(
        world: ServiceWorld) -> None:
    for n in range(0, 40, 2):  # u000, u002, ... u038: room for inserts in between
        _set(world, n, f"v{n}")

    # A write of u001 has minted its pointer id and put its object, and is held before
    # its commit until the walk is half done. (PostgreSQL only: SQLite's one writer holds
    # the database's write lock at that step, so nothing else could run meanwhile.)
    held, release = threading.Event(), threading.Event()
    plane = world.runtime.plane
    on_postgres = world.runtime.engine.dialect.name == "postgresql"

    def checkpoint(step: str) -> None:
        if step == "write:after_put" and threading.current_thread().name == "late-writer":
            held.set()
            assert release.wait(WAIT)

    plane.checkpoint = checkpoint
    late = threading.Thread(target=_set, args=(world, 1, "late"), name="late-writer")
    if on_postgres:
        late.start()
        assert held.wait(WAIT)

    # Between pages: new rows on both sides of the cursor, overwrites of rows on both sides,
    # deletes on both sides. Rows 0..19 (even) that are neither deleted nor inserted exist
    # throughout.
    deleted = {10, 30}
    mutations = [
        lambda: (_set(world, 3, "new"), _set(world, 39, "new")),
        lambda: (_set(world, 0, "again"), _set(world, 36, "again")),
        lambda: (_delete(world, 10), _delete(world, 30)),
        release.set if on_postgres else lambda: (release.set(), late.start(), late.join(WAIT)),
        lambda: (_set(world, 21, "new"), _set(world, 2, "again")),
    ]
    seen: list[tuple[str, str]] = []
    first, cursor = _page(world, None)
    seen += first
    step = 0
    while cursor is not None:
        if step < len(mutations):
            mutations[step]()
            step += 1
        more, cursor = _page(world, cursor)
        seen += more
    late.join(WAIT)
    assert not late.is_alive()
    assert step == len(mutations)  # every mutation ran mid-walk

    ids = Counter(i for i, _ in seen)
    refs = Counter(ref for _, ref in seen)
    assert [i for i, c in ids.items() if c > 1] == []
    assert [r for r, c in refs.items() if c > 1] == []
    throughout = {f"u{n:03d}" for n in range(0, 40, 2)} - {f"u{n:03d}" for n in deleted}
    assert throughout - set(refs) == set()
    # Whatever the walk showed of rows that came or went meanwhile, nothing else appeared.
    assert set(refs) <= throughout | {"u001", "u003", "u039", "u021", "u010", "u030"}
    final, cursor = _page(world, None)
    while cursor is not None:
        more, cursor = _page(world, cursor)
        final += more
    assert sorted(ref for _, ref in final) == sorted(
        throughout | {"u001", "u003", "u039", "u021"})
