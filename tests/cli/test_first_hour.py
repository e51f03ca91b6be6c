"""What a new operator meets first on the command line: global options accepted after a
subcommand, `keys list` and `keys revoke`, a misspelt MEMPLANE_* variable named with the
nearest setting, the generated admin key's replacement by MEMPLANE_ADMIN_KEY said once, and
`memory set --type` listing exactly the memory types the README and the server know."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from control_plane.addresses import MEMORY_TYPES
from memplane.cli import app, hoist_global_options

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "mp_first_hour_admin_key_0123456789abcdef"


def _memplane(cwd: Path, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="200", **settings)
    return subprocess.run([sys.executable, "-c", "from memplane.cli import main; main()",
                           *args], cwd=cwd, env=env, text=True, capture_output=True,
                          timeout=120)


def test_global_options_after_a_subcommand_are_accepted() -> None:
    assert hoist_global_options(["memory", "list", "--data-dir", "X", "--json"]) == [
        "--data-dir", "X", "memory", "list", "--json"]
    assert hoist_global_options(["keys", "list", "--data-dir=X", "--init"]) == [
        "--data-dir=X", "--init", "keys", "list"]
    assert hoist_global_options(["memory", "set", "user", "u", "k", "--", "--init"]) == [
        "memory", "set", "user", "u", "k", "--", "--init"]


def test_keys_list_and_revoke_with_options_after_the_subcommand(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    created = _memplane(tmp_path, "keys", "create", "--role", "agent", "--scope", "team/T1",
                        "--agent-id", "bot", "--init", "--data-dir", data)
    assert created.returncode == 0, created.stderr
    first_admin, agent_key = [line for line in created.stdout.splitlines()
                              if line.startswith("mp_")]
    listed = _memplane(tmp_path, "keys", "list", "--json", "--data-dir", data)
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["role"], r["scopes"], r["agent_id"], r["prefix"]) for r in rows] == [
        ("admin", None, None, first_admin[:10]), ("agent", ["team/T1"], "bot", agent_key[:10])]
    assert first_admin not in listed.stdout and agent_key not in listed.stdout

    revoked = _memplane(tmp_path, "keys", "revoke", rows[1]["id"], "--data-dir", data)
    assert (revoked.returncode, revoked.stderr.splitlines()[-1]) == (
        0, f"revoked key {rows[1]['id']}")
    again = _memplane(tmp_path, "keys", "revoke", rows[1]["id"], "--data-dir", data)
    assert (again.returncode, again.stderr.splitlines()[-1]) == (
        1, "memplane: no active API key with that id in this tenant")
    after = _memplane(tmp_path, "--data-dir", data, "keys", "list", "--json")
    assert [json.loads(line)["id"] for line in after.stdout.splitlines()] == [rows[0]["id"]]

    # MEMPLANE_ADMIN_KEY replaces the generated key: said once, naming no key material.
    replaced = _memplane(tmp_path, "keys", "create", "--role", "agent", "--data-dir", data,
                         MEMPLANE_ADMIN_KEY=ADMIN)
    assert replaced.returncode == 0, replaced.stderr
    said = [line for line in replaced.stderr.splitlines() if "MEMPLANE_ADMIN_KEY" in line]
    assert said == [f"MEMPLANE_ADMIN_KEY is a new bootstrap admin key: the previous one (key "
                    f"id {rows[0]['id']}, generated at first start) is revoked and no longer "
                    f"works"]
    assert first_admin[3:] not in replaced.stderr and ADMIN[3:] not in replaced.stderr
    once = _memplane(tmp_path, "keys", "create", "--role", "agent", "--data-dir", data,
                     MEMPLANE_ADMIN_KEY=ADMIN)
    assert once.returncode == 0 and "MEMPLANE_ADMIN_KEY" not in once.stderr


def test_a_misspelt_setting_is_named_once_with_the_nearest_one(tmp_path: Path) -> None:
    done = _memplane(tmp_path, "--init", "--data-dir", str(tmp_path / "d"), "db", "upgrade",
                     MEMPLANE_DATABSE_URL="postgresql://u:hunter2@db/x",
                     MEMPLANE_URL="http://localhost:8080", MEMPLANE_SERVER_KEY_FILE="/nowhere",
                     MEMPLANE_ZZZ="1")
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warnings == [
        "memplane: warning: MEMPLANE_DATABSE_URL is not a memplane setting and is ignored; did "
        "you mean MEMPLANE_DATABASE_URL?",
        "memplane: warning: MEMPLANE_ZZZ is not a memplane setting and is ignored; the README's "
        "Configuration table lists every setting"]
    assert "hunter2" not in done.stderr + done.stdout


def test_memory_set_type_lists_the_readme_and_server_types() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"A write may also carry `memory_type` \(((?:`\w+`,\s+)+)…\)", readme)
    assert listed is not None
    assert tuple(re.findall(r"`(\w+)`", listed[1])) == MEMORY_TYPES
    shown = CliRunner().invoke(app, ["memory", "set", "--help"], env={"COLUMNS": "300"})
    text = " ".join(shown.output.split())
    assert f"The memory type: {', '.join(MEMORY_TYPES)}, or a lower-case label" in text
    assert "episodic" not in text
