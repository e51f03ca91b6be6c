"""The bench's floors do the work memplane does: every write and every verified read leaves
exactly one audit row, a read checks the object's SHA-256, and the HTTP floor serves the same
operations over FastAPI."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from bench.http_floor import create_app
from bench.stacks import Floor
from control_plane.db.models import AccessLog
from tests.support.service import ServiceWorld

PAYLOAD = b'{"value":{"text":"' + b"x" * 1000 + b'"}}'


def _floor(world: ServiceWorld, tmp_path: Path, *, audit: bool = True) -> Floor:
    return Floor(world.runtime.engine, f"file://{tmp_path / 'bucket'}", world.tenant_id,
                 audit=audit)


def _audit_rows(world: ServiceWorld) -> list[tuple[Any, ...]]:
    with world.runtime.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(
            select(AccessLog.operation, AccessLog.success, AccessLog.accessor_id,
                   AccessLog.detail)
            .where(AccessLog.tenant_id == world.tenant_id, AccessLog.accessor_id == "floor")
            .order_by(AccessLog.accessed_at))]


def test_the_floor_audits_each_write_and_each_verified_read(world: ServiceWorld,
                                                            tmp_path: Path) -> None:
    floor = _floor(world, tmp_path)
    try:
        floor.set("a", PAYLOAD)
        floor.set("a", PAYLOAD + b" ")  # an overwrite moves the pointer to the new object
        assert floor.get("a") == PAYLOAD + b" "
        assert floor.get("a") == PAYLOAD + b" "
    finally:
        floor.close()
    assert _audit_rows(world) == [("write", True, "floor", "a"), ("write", True, "floor", "a"),
                                  ("read", True, "floor", "a"), ("read", True, "floor", "a")]


def test_the_bare_floor_writes_no_audit_row(world: ServiceWorld, tmp_path: Path) -> None:
    floor = _floor(world, tmp_path, audit=False)
    try:
        floor.set("b", PAYLOAD)
        assert floor.get("b") == PAYLOAD
    finally:
        floor.close()
    assert _audit_rows(world) == []


def test_the_floor_refuses_an_object_that_does_not_match_its_hash(world: ServiceWorld,
                                                                  tmp_path: Path) -> None:
    floor = _floor(world, tmp_path)
    try:
        floor.set("c", PAYLOAD)
        with world.runtime.engine.connect() as conn:
            (path,) = conn.execute(text("SELECT path FROM bench_floor WHERE key = :k"),
                                   {"k": f"{floor.prefix}/c"}).one()
        (tmp_path / "bucket" / path).write_bytes(PAYLOAD.replace(b"x", b"y", 1))
        with pytest.raises(AssertionError, match="floor read a different object"):
            floor.get("c")
    finally:
        floor.close()
    if world.runtime.engine.dialect.name == "postgresql":
        # the lookup appended the read's row in its statement; the mismatch appends its failure
        assert _audit_rows(world) == [("write", True, "floor", "c"), ("read", True, "floor", "c"),
                                      ("read", False, "floor", "c")]
    else:  # the group-committed row goes in only after the check: no read was served
        assert _audit_rows(world) == [("write", True, "floor", "c")]


def test_the_floors_read_on_postgresql_is_one_statement(world: ServiceWorld,
                                                        tmp_path: Path) -> None:
    """On PostgreSQL the floor reads as memplane's hot path reads a known address: one
    statement looks the pointer up and appends the read's audit row; no group commit."""
    floor = _floor(world, tmp_path)
    try:
        floor.set("d", PAYLOAD)
        assert floor.get("d") == PAYLOAD
    finally:
        floor.close()
    postgres = world.runtime.engine.dialect.name == "postgresql"
    assert floor.batcher is None if postgres else floor.batcher is not None
    assert _audit_rows(world) == [("write", True, "floor", "d"), ("read", True, "floor", "d")]


def test_the_http_floor_stores_and_serves_the_body_as_sent(world: ServiceWorld,
                                                           tmp_path: Path) -> None:
    floor = _floor(world, tmp_path)
    key = f"k-{uuid.uuid4().hex[:6]}"
    try:
        with TestClient(create_app(floor)) as client:
            put = client.put(f"/floor/{key}", content=PAYLOAD,
                             headers={"content-type": "application/json"})
            assert (put.status_code, put.content) == (200, b"{}")
            got = client.get(f"/floor/{key}")
            assert (got.status_code, got.content) == (200, PAYLOAD)
            assert client.get("/readyz").status_code == 200
    finally:
        floor.close()
    assert _audit_rows(world) == [("write", True, "floor", key), ("read", True, "floor", key)]


def test_the_floors_batch_stores_every_object_and_audits_every_write(world: ServiceWorld,
                                                                     tmp_path: Path) -> None:
    floor = _floor(world, tmp_path)
    keys = [f"m-{i}" for i in range(5)]
    try:
        with TestClient(create_app(floor)) as client:
            answer = client.post("/floor:batch", json={"items": [
                {"key": key, "value": {"text": key * 3}} for key in keys]})
            assert (answer.status_code, answer.content) == (200, b"{}")
        assert [floor.get(key) for key in keys] == [
            b'{"text": "' + key.encode() * 3 + b'"}' for key in keys]
        with world.runtime.engine.connect() as conn:
            stored = conn.execute(text("SELECT count(*) FROM bench_floor WHERE key LIKE :p"),
                                  {"p": f"{floor.prefix}/m-%"}).scalar_one()
    finally:
        floor.close()
    assert stored == 5
    assert sorted(_audit_rows(world)) == sorted(
        [("write", True, "floor", key) for key in keys]
        + [("read", True, "floor", key) for key in keys])


def test_the_search_bench_fills_its_scope_through_the_batch_protocol(
        world: ServiceWorld) -> None:
    """``bench.search`` fills a scope as the batch API does (lookup and sealed put per
    memory, one commit per chunk): every text ends up readable at its key."""
    from bench.search import _fill
    from control_plane.addresses import MemoryAddress, Scope

    texts = [f"memory number {i}" for i in range(7)]
    _fill(world.runtime, world.actor, "filled", texts, chunk=3)
    assert [world.read(MemoryAddress.parse(Scope.agent, "filled", f"m{i}"))
            for i in range(7)] == texts


def test_the_processes_of_one_served_floor_read_each_others_writes(world: ServiceWorld,
                                                                   tmp_path: Path) -> None:
    # `python -m bench.http_floor --workers 2`: each process builds its own Floor; the
    # served floor gives them one prefix, so a read finds a key another process wrote.
    prefix = f"floor/{uuid.uuid4().hex}"
    first, second = (Floor(world.runtime.engine, f"file://{tmp_path / 'bucket'}",
                           world.tenant_id, prefix=prefix) for _ in range(2))
    try:
        first.set("shared", PAYLOAD)
        assert second.get("shared") == PAYLOAD
        assert (first.prefix, second.prefix) == (prefix, prefix)
    finally:
        first.close()
        second.close()
    own = _floor(world, tmp_path)  # a floor of its own otherwise
    own.close()
    assert own.prefix.startswith("floor/") and own.prefix != prefix
