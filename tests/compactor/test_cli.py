"""``memplane compact [--tenant] [--dry-run]`` on the embedded default's database and bucket."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from control_plane.db.base import utcnow
from control_plane.db.models import MemoryEvent, MemoryPointer
from control_plane.events import service as events
from control_plane.events.schemas import EventIn
from control_plane.identity import Actor
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.tenants.service import create_tenant
from memplane.cli import app

ADMIN = "mp_cli_admin_key_0001_for_the_compactor"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"MEMPLANE_DATA_DIR": str(tmp_path / "data"), "MEMPLANE_ADMIN_KEY": ADMIN}


def _run(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def _seed(env: dict[str, str]) -> tuple[list[uuid.UUID], uuid.UUID]:
    runtime = Runtime(Settings(data_dir=Path(env["MEMPLANE_DATA_DIR"]), admin_key=ADMIN))
    runtime.migrate()
    try:
        tenants = []
        with runtime.sessions() as session:
            for name, refs in (("a", ("ent_acme", "ent_beta")), ("b", ("ent_acme",))):
                tenant, _ = create_tenant(session, name)
                tenants.append(tenant.id)
                actor = Actor(tenant.id, "api", "seed")
                for ref in refs:
                    for i in range(3):
                        spec = EventIn(scope="entity", scope_ref=ref,  # type: ignore[arg-type]
                                       kind="decision", body=f"We decided step {i}.",
                                       occurred_at=utcnow() - timedelta(days=100 + i))
                        assert isinstance(events.append_event(session, runtime.plane, actor,
                                                              spec), MemoryEvent)
            idle, _ = create_tenant(session, "idle")
    finally:
        runtime.close()
    return tenants, idle.id


def _lines(stdout: str) -> dict[str, dict[str, object]]:
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return {str(row.pop("tenant")): row for row in rows}


def _compressed(env: dict[str, str]) -> tuple[int, int]:
    runtime = Runtime(Settings(data_dir=Path(env["MEMPLANE_DATA_DIR"]), admin_key=ADMIN))
    try:
        with runtime.sessions() as session:
            marked = session.scalar(select(func.count()).select_from(MemoryEvent).where(
                MemoryEvent.compressed_at.is_not(None)))
            written = session.scalar(select(func.count()).select_from(MemoryPointer).where(
                MemoryPointer.source == "compactor"))
    finally:
        runtime.close()
    return int(marked or 0), int(written or 0)


def test_compact_dry_run_then_for_real_then_again(env: dict[str, str]) -> None:
    (first, second), idle = _seed(env)
    code, out, _ = _run(env, "compact", "--dry-run")
    assert code == 0, out
    dry = _lines(out)
    assert set(dry) == {str(first), str(second)}  # not the idle tenant
    assert str(idle) not in dry
    assert (dry[str(first)]["buckets"], dry[str(first)]["events_compressed"],
            dry[str(first)]["dry_run"]) == (2, 6, True)
    assert _compressed(env) == (0, 0)

    code, out, _ = _run(env, "compact", "--tenant", str(first))
    assert code == 0, out
    assert _lines(out) == {str(first): {
        "buckets": 2, "compacted_buckets": 2, "events_compressed": 6, "entries_written": 2,
        "failed_buckets": 0, "skipped_buckets": 0, "budget_spent": False, "dry_run": False,
        "failures": {}}}
    assert _compressed(env) == (6, 2)

    code, out, _ = _run(env, "compact")
    assert code == 0, out
    rows = _lines(out)  # only tenants with uncompressed events: the first has none left
    assert set(rows) == {str(second)} and rows[str(second)]["entries_written"] == 1
    assert _compressed(env) == (9, 3)


def test_compact_names_a_wrong_tenant(env: dict[str, str]) -> None:
    _seed(env)
    code, _, err = _run(env, "compact", "--tenant", "nope")
    assert code == 2 and "'nope' is not a tenant id" in err
    missing = uuid.uuid4()
    code, _, err = _run(env, "compact", "--tenant", str(missing))
    assert code == 1 and f"no tenant {missing}" in err
