"""Writing memories and events through the services, and looking at both planes directly."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import AccessLog, MemoryEvent, MemoryPointer
from control_plane.events import service as events
from control_plane.events.schemas import EventIn
from control_plane.holds import service as holds
from control_plane.holds.schemas import HoldIn
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.retention import policies, sweep
from control_plane.retention.schemas import PolicyIn
from control_plane.runtime import Runtime
from control_plane.tenants.service import create_tenant
from tests.support.service import ServiceWorld, isolated_database, make_settings


def put(world: ServiceWorld, scope: str, ref: str, key: str, value: Any = "v",
        **meta: Any) -> MemoryPointer:
    with world.runtime.sessions() as session:
        result = memories.set_value(session, world.runtime.plane, world.actor,
                                    MemoryAddress.parse(Scope(scope), ref, key), value,
                                    MemoryMeta.model_validate(meta))
    assert isinstance(result, MemoryPointer)
    return result


def event(world: ServiceWorld, occurred_at: datetime, scope: str = "entity",
          ref: str = "ent_acme", **extra: Any) -> MemoryEvent:
    spec = EventIn.model_validate({"scope": scope, "scope_ref": ref, "kind": "decision",
                                   "body": "## note\nA decision.",
                                   "occurred_at": occurred_at.isoformat(), **extra})
    with world.runtime.sessions() as session:
        result = events.append_event(session, world.runtime.plane, world.actor, spec)
    assert isinstance(result, MemoryEvent)
    return result


def policy(world: ServiceWorld, **body: Any) -> uuid.UUID:
    with world.runtime.sessions() as session:
        return policies.put_policy(session, world.actor, PolicyIn.model_validate(body)).id


def hold(world: ServiceWorld, **body: Any) -> str:
    with world.runtime.sessions() as session:
        placed = holds.place(session, world.actor, HoldIn.model_validate(body))
    assert not isinstance(placed, holds.Replay)
    return placed.id


def lift(world: ServiceWorld, hold_id: str) -> None:
    with world.runtime.sessions() as session:
        holds.lift(session, world.actor, hold_id, credentials=world.runtime.plane.credentials)


def run(world: ServiceWorld, now: datetime, dry_run: bool = False) -> dict[str, Any]:
    with world.runtime.sessions() as session:
        return sweep.run_tenant(session, world.runtime.plane, world.tenant_id,
                                    actor=world.actor, dry_run=dry_run, now=now)


def pointers(world: ServiceWorld) -> dict[str, MemoryPointer]:
    """The tenant's pointers by key (entries by id)."""
    with world.runtime.sessions() as session:
        return {p.key or str(p.id): p for p in session.scalars(
            select(MemoryPointer).where(MemoryPointer.tenant_id == world.tenant_id))}


def event_rows(world: ServiceWorld) -> list[MemoryEvent]:
    with world.runtime.sessions() as session:
        return list(session.scalars(select(MemoryEvent).where(
            MemoryEvent.tenant_id == world.tenant_id)))


def objects(world: ServiceWorld, prefix: str = "") -> set[str]:
    """Every object (every version, on a versioned bucket) under the tenant's prefix."""
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    root = target.path(prefix)
    return {v.path for v in target.adapter.list_versions(root + "/" if root else "")
            if "/audit/" not in f"/{v.path}"}


def deletes(world: ServiceWorld) -> list[AccessLog]:
    with world.runtime.sessions() as session:
        return list(session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "delete",
            AccessLog.success.is_(True)).order_by(AccessLog.id)))


def backdate(world: ServiceWorld, pointer_ids: list[uuid.UUID], when: datetime) -> None:
    with world.runtime.sessions() as session:
        session.execute(update(MemoryPointer).where(MemoryPointer.id.in_(pointer_ids))
                        .values(updated_at=when))
        session.commit()


@contextmanager
def own_world(database: str, request: pytest.FixtureRequest,
              data_dir: Path) -> Iterator[ServiceWorld]:
    """A ServiceWorld on a database of its own: a job worker there claims only this test's
    jobs (the shared one holds every other test's tenants and jobs)."""
    from control_plane.plane.data_plane import no_faults

    url = isolated_database(database, request)
    runtime = Runtime(make_settings(url, data_dir))
    if url == "sqlite":
        runtime.migrate()
    try:
        with runtime.sessions() as session:
            created, _ = create_tenant(session, f"t-{uuid.uuid4().hex[:8]}")
        world = ServiceWorld(runtime, created.id)
        runtime.plane.checkpoint = world.checkpoint
        yield world
        runtime.plane.checkpoint = no_faults
    finally:
        runtime.close()
