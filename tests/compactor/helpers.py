"""Databases of their own for the compactor's tests, and raw event rows for the schedule's.

The schedule and the runs act on every tenant of a database, so each test gets a database
no other test's server or worker sees (``isolated_database``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.db.base import new_id, utcnow
from control_plane.db.models import Job, MemoryEvent
from control_plane.runtime import Runtime
from control_plane.tenants.service import create_tenant
from tests.support.service import isolated_database, make_settings


@contextmanager
def own_runtime(database: str, request: pytest.FixtureRequest, data_dir: Path,
                **overrides: Any) -> Iterator[Runtime]:
    url = isolated_database(database, request)
    runtime = Runtime(make_settings(url, data_dir, **overrides))
    if url == "sqlite":
        runtime.migrate()
    try:
        yield runtime
    finally:
        runtime.close()


def new_tenant(runtime: Runtime, name: str = "t") -> uuid.UUID:
    with runtime.sessions() as session:
        created, _ = create_tenant(session, f"{name}-{uuid.uuid4().hex[:6]}")
    return created.id


def raw_events(runtime: Runtime, tenant_id: uuid.UUID, n: int, *, scope: str = "entity",
               scope_ref: str = "ent_acme", age_days: float = 200) -> list[uuid.UUID]:
    """Event rows only (no body object): enough for what reads metadata — the schedule's
    choice of tenants and the selection query."""
    with runtime.sessions() as session:
        config_id = runtime.plane.active(session, tenant_id).config_id
        ids = []
        for i in range(n):
            occurred = utcnow() - timedelta(days=age_days, minutes=i)
            event = MemoryEvent(
                id=new_id(), tenant_id=tenant_id, scope_type=scope, scope_ref=scope_ref,
                kind="call_summary", source="api", occurred_at=occurred,
                storage_config_id=config_id, storage_path=f"events/x/{i}.json",
                content_sha256="0" * 64, content_size=1, sync_status="synced",
                created_at=utcnow())
            session.add(event)
            ids.append(event.id)
        session.commit()
    return ids


def jobs_of(runtime: Runtime, kind: str = "compact") -> list[Job]:
    with runtime.sessions() as session:
        return list(session.scalars(select(Job).where(Job.kind == kind)
                                    .order_by(Job.created_at)))


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)
