"""The operator commands, run against the embedded default's database and bucket."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db import migrate
from control_plane.db.engine import make_engine
from control_plane.db.migrate import script_heads
from control_plane.identity import authenticate
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.tenants.service import ensure_bootstrap
from memplane.cli import app

ADMIN = "mp_cli_admin_key_0001_for_the_cli_tests"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"MEMPLANE_DATA_DIR": str(tmp_path / "data"), "MEMPLANE_ADMIN_KEY": ADMIN}


def _run(env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.output


def test_db_upgrade_then_keys_create_gives_a_working_key(env: dict[str, str]) -> None:
    code, output = _run(env, "--init", "db", "upgrade")
    assert code == 0
    versions = Path(migrate.__file__).parent / "migrations" / "versions"
    total = len([p for p in versions.glob("*.py") if p.name != "__init__.py"])
    assert total >= 30
    # One line, from -> to, however many parallel branches the migrations have.
    assert output.splitlines()[-1] == f"database migrations: 0 → {total} of {total} " \
                                      f"({total} applied)"
    code, output = _run(env, "db", "upgrade")
    assert (code, output.splitlines()[-1]) == (
        0, f"database migrations: {total} → {total} of {total} (up to date)")
    assert script_heads()[0] not in output
    code, output = _run(env, "keys", "create", "--role", "agent", "--name", "bot")
    assert code == 0
    key = output.strip().splitlines()[-1]
    runtime = Runtime(Settings(data_dir=Path(env["MEMPLANE_DATA_DIR"])))
    try:
        with runtime.sessions() as session:
            caller = authenticate(session, f"Bearer {key}")
    finally:
        runtime.close()
    assert caller.role == "agent"


def test_keys_create_refuses_an_unknown_role(env: dict[str, str]) -> None:
    code, output = _run(env, "--init", "keys", "create", "--role", "root")
    assert code == 2
    assert "role must be one of admin, agent, compliance" in output


def test_reconcile_collects_an_orphan_and_audit_verify_reports(env: dict[str, str]) -> None:
    settings = Settings(data_dir=Path(env["MEMPLANE_DATA_DIR"]), admin_key=ADMIN)
    runtime = Runtime(settings)
    runtime.migrate()
    try:
        with runtime.sessions() as session:
            ensure_bootstrap(session, ADMIN)
            caller = authenticate(session, f"Bearer {ADMIN}")
            memories.set_value(session, runtime.plane, caller.actor,
                               MemoryAddress.parse(Scope.user, "u1", "k"), 1, MemoryMeta())
            target = runtime.plane.active(session, caller.tenant_id)
            target.adapter.put(target.path("memories/user/u1/k/orphan.json"), b"1")
    finally:
        runtime.close()

    code, output = _run(env, "reconcile", "--grace-seconds", "0")
    assert code == 0
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in output.splitlines() if line.count("│") == 3}
    assert rows["orphan objects deleted"] == "1"
    assert rows["objects scanned"] == "2"
    assert rows["corrupt pointers"] == "0"

    code, output = _run(env, "audit", "verify")
    assert code == 0
    report = json.loads(output.strip().splitlines()[-1])
    engine = make_engine(settings.resolved_database_url)
    with engine.begin() as conn:  # one tenant here: every row is in its chain
        rows = conn.execute(text("SELECT count(*), count(seq) FROM access_logs")).one()
    assert rows[0] == rows[1] > 0  # all sealed
    assert report == {**report, "ok": True, "unsealed": 0, "checked": rows[0]}

    with engine.begin() as conn:
        conn.execute(text("UPDATE access_logs SET detail = 'x' WHERE seq = 1"))
    engine.dispose()
    code, output = _run(env, "audit", "verify")
    assert code == 1
    assert json.loads(output.strip().splitlines()[-1])["first_bad_seq"] == 1


def test_keys_rotate_retire_and_verify_work_on_the_database(env: dict[str, str]) -> None:
    settings = Settings(data_dir=Path(env["MEMPLANE_DATA_DIR"]), admin_key=ADMIN)
    runtime = Runtime(settings)
    runtime.migrate()
    try:
        with runtime.sessions() as session:
            ensure_bootstrap(session, ADMIN)
            caller = authenticate(session, f"Bearer {ADMIN}")
            for key in ("a", "b"):
                memories.set_value(session, runtime.plane, caller.actor,
                                   MemoryAddress.parse(Scope.user, "u1", key), key,
                                   MemoryMeta())
            target = runtime.plane.active(session, caller.tenant_id)
            pointer = memories.get_value(session, runtime.plane, caller.actor,
                                         MemoryAddress.parse(Scope.user, "u1", "b")).pointer
            target.adapter.delete_many([pointer.storage_path])
    finally:
        runtime.close()

    code, output = _run(env, "keys", "rotate")
    assert code == 0
    assert json.loads(output.strip().splitlines()[-1])["rewrapped"] == 1
    code, output = _run(env, "keys", "retire-kek")
    assert code == 0
    assert json.loads(output.strip().splitlines()[-1])["retired"] == [1]
    code, output = _run(env, "verify")
    assert code == 1
    report = json.loads(output.strip().splitlines()[-1])
    assert {k: report[k] for k in ("clean", "checked", "ok", "missing", "corrupt")} == {
        "clean": False, "checked": 2, "ok": 1, "missing": 1, "corrupt": 0}
    assert "missing" in output and "key=b" in output
