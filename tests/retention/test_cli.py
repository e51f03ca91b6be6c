"""``memplane retention run|policies``, ``memplane cleanup`` and ``memplane holds`` on the
embedded default's database and bucket."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from sqlalchemy import select, update
from typer.testing import CliRunner

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import utcnow
from control_plane.db.models import MemoryPointer
from control_plane.identity import Actor
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.retention import policies
from control_plane.retention.schemas import PolicyIn
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.tenants.service import create_tenant
from memplane.cli import app

ADMIN = "mp_cli_admin_key_0001_for_retention_tests"


def _run(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def _keys(runtime: Runtime) -> set[str | None]:
    with runtime.sessions() as session:
        return set(session.scalars(select(MemoryPointer.key)))


def test_retention_cleanup_and_holds_commands(tmp_path: Path) -> None:
    env = {"MEMPLANE_DATA_DIR": str(tmp_path / "data"), "MEMPLANE_ADMIN_KEY": ADMIN}
    runtime = Runtime(Settings(data_dir=tmp_path / "data", admin_key=ADMIN))
    runtime.migrate()
    try:
        with runtime.sessions() as session:
            tenant, _ = create_tenant(session, "cli")
        actor = Actor(tenant.id, "api", "seed")
        with runtime.sessions() as session:
            for scope, ref, key in (("user", "u1", "old"), ("user", "u2", "held"),
                                    ("agent", "bot", "stale"), ("agent", "bot", "prefs")):
                memories.set_value(session, runtime.plane, actor,
                                   MemoryAddress.parse(Scope(scope), ref, key), 1,
                                   MemoryMeta(agent_id="bot"))
            policies.put_policy(session, actor, PolicyIn.model_validate(
                {"scope": "user", "retention_days": 30, "auto_delete": True}))
            session.execute(update(MemoryPointer).values(
                updated_at=utcnow() - timedelta(days=200)))
            session.commit()
    finally:
        runtime.close()
    tenant_opt = ("--tenant", str(tenant.id))

    code, out, err = _run(env, "holds", "place", "--user", "u2", "--reason", "litigation",
                          *tenant_opt)
    assert code == 0, err
    hold = json.loads(out)
    assert (hold["target"], hold["active"]) == ("subject", True)

    code, out, err = _run(env, "retention", "policies", *tenant_opt)
    assert code == 0, err
    assert [json.loads(line)["scope"] for line in out.splitlines()] == ["user"]

    code, out, err = _run(env, "retention", "run", "--dry-run", *tenant_opt)
    assert code == 0, err
    planned = json.loads(out)
    assert (planned["policies"][0]["due"], planned["policies"][0]["held"]) == (1, 1)

    code, out, err = _run(env, "retention", "run", *tenant_opt)
    assert code == 0, err
    assert json.loads(out)["deleted"] == 1

    code, out, err = _run(env, "cleanup", "--agent", "bot", "--older-than", "180d",
                          "--exclude-key", "prefs", "--dry-run", *tenant_opt)
    assert code == 0, err
    plan = json.loads(out)
    assert (plan["matched"], plan["held"], plan["excluded"]) == (1, 1, 1)
    assert [i["key"] for i in plan["items"]] == ["stale"]

    code, out, err = _run(env, "cleanup", "--agent", "bot", "--older-than", "soon",
                          *tenant_opt)
    assert code == 2
    assert "older-than" in err

    code, out, err = _run(env, "cleanup", "--agent", "bot", "--older-than", "180d",
                          "--exclude-key", "prefs", *tenant_opt)
    assert code == 0, err
    assert json.loads(out)["deleted"] == 1

    code, out, err = _run(env, "holds", "lift", hold["id"], *tenant_opt)
    assert code == 0, err
    assert json.loads(out)["active"] is False
    code, out, err = _run(env, "holds", "list", *tenant_opt)
    assert [json.loads(line)["id"] for line in out.splitlines()] == [hold["id"]]

    runtime = Runtime(Settings(data_dir=tmp_path / "data", admin_key=ADMIN))
    try:
        assert _keys(runtime) == {"held", "prefs"}
    finally:
        runtime.close()
