"""The CLI knows where it is: it names the database and bucket it uses, refuses to start on a
data dir memplane did not create, prints its version, and reads and writes memories."""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

import memplane
from control_plane.db.engine import make_engine
from control_plane.db.models import AccessLog
from memplane.cli import app

ADMIN = "mp_cli_where_admin_key_0001_for_tests"
PASSWORD = "Hunter2-never-printed"


@dataclass
class Place:
    env: dict[str, str]
    where_line: str  # what every command touching the database prints on stderr
    database_url: str  # with the password, to look at the database


def _run(place_env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=place_env)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(params=["sqlite", "postgres"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    data_dir = tmp_path / "data"
    env = {"MEMPLANE_DATA_DIR": str(data_dir), "MEMPLANE_ADMIN_KEY": ADMIN}
    if request.param == "sqlite":
        url = f"sqlite:///{data_dir.resolve() / 'memplane.db'}"
        line = f"memplane: database {url}; bucket file://{data_dir.resolve() / 'bucket'}"
        code, _, err = _run(env, "--init", "db", "upgrade")
        assert code == 0, err
        return Place(env, line, url)
    pg = request.getfixturevalue("postgres")
    plain = pg.create_database()  # postgresql+psycopg://postgres@127.0.0.1:PORT/NAME
    host_and_db = plain.split("@", 1)[1]
    url = f"postgresql://postgres:{PASSWORD}@{host_and_db}"
    env.update(MEMPLANE_DATABASE_URL=url, MEMPLANE_SERVER_KEY=secrets.token_hex(24),
               MEMPLANE_DEFAULT_BUCKET_URL=f"file://{tmp_path / 'bucket'}",
               MEMPLANE_RECEIPT_SIGNING_KEY=base64.b64encode(secrets.token_bytes(32)).decode())
    line = (f"memplane: database postgresql://postgres:***@{host_and_db}; "
            f"bucket file://{tmp_path / 'bucket'}")
    code, _, err = _run(env, "db", "upgrade")
    assert code == 0, err
    return Place(env, line, url)


def _lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("memplane: database ")]


def test_each_database_command_names_its_database_and_bucket_without_the_password(
        place: Place) -> None:
    code, _, err = _run(place.env, "keys", "create", "--role", "agent")
    assert code == 0, err
    commands = [["db", "upgrade"], ["keys", "create", "--role", "agent"], ["verify"],
                ["reconcile"], ["audit", "verify"], ["keys", "rotate"], ["keys", "retire-kek"],
                ["memory", "set", "user", "u1", "lang", '"fr"'],
                ["memory", "get", "user", "u1", "lang"], ["memory", "list"],
                ["memory", "delete", "user", "u1", "lang"]]
    for command in commands:
        code, out, err = _run(place.env, *command)
        assert code == 0, (command, err)
        assert _lines(err) == [place.where_line], command
        assert PASSWORD not in out + err


def test_memory_commands_store_read_list_and_delete_audited_as_the_operator(
        place: Place) -> None:
    code, _, err = _run(place.env, "keys", "create", "--role", "agent")  # makes the tenant
    assert code == 0, err
    code, out, err = _run(place.env, "memory", "set", "user", "u1", "prefs",
                          '{"lang": "fr", "n": 2}', "--tag", "ui", "--importance", "4")
    assert code == 0, err
    written = json.loads(out)
    assert (written["scope"], written["scope_ref"], written["key"]) == ("user", "u1", "prefs")
    code, out, err = _run(place.env, "memory", "set", "team", "t1", "motto", "be kind",
                          "--text")
    assert code == 0, err

    code, out, _ = _run(place.env, "memory", "get", "user", "u1", "prefs")
    assert (code, json.loads(out)) == (0, {"lang": "fr", "n": 2})
    code, out, _ = _run(place.env, "memory", "get", "team", "t1", "motto")
    assert (code, out) == (0, '"be kind"\n')

    code, out, _ = _run(place.env, "memory", "list", "--json")
    listed = sorted((row["scope"], row["scope_ref"], row["key"], row["status"])
                    for row in map(json.loads, out.splitlines()))
    assert (code, listed) == (0, [("team", "t1", "motto", "synced"),
                                  ("user", "u1", "prefs", "synced")])
    code, out, _ = _run(place.env, "memory", "list", "--scope", "user", "--json")
    assert [json.loads(row)["id"] for row in out.splitlines()] == [written["id"]]

    code, out, _ = _run(place.env, "memory", "delete", "user", "u1", "prefs")
    assert (code, out) == (0, "deleted user/u1 key=prefs\n")
    code, out, err = _run(place.env, "memory", "get", "user", "u1", "prefs")
    assert (code, out) == (1, "")
    assert "memplane: no memory at user/u1 key=prefs" in err

    engine = make_engine(place.database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(AccessLog.accessor_type, AccessLog.accessor_id,
                                       AccessLog.operation, AccessLog.success)
                                .where(AccessLog.accessor_id.like("cli:memory-%"))
                                .order_by(AccessLog.id)).all()
    finally:
        engine.dispose()
    assert sorted(tuple(row) for row in rows) == sorted([
        ("system", "cli:memory-set", "write", True),
        ("system", "cli:memory-set", "write", True),
        ("system", "cli:memory-get", "read", True),
        ("system", "cli:memory-get", "read", True),
        ("system", "cli:memory-list", "list", True),
        ("system", "cli:memory-list", "list", True),
        ("system", "cli:memory-delete", "delete", True),
        ("system", "cli:memory-get", "read", False),
    ])


@pytest.mark.parametrize("command", [
    ["verify"], ["reconcile"], ["keys", "create", "--role", "agent"], ["audit", "verify"],
    ["keys", "rotate"], ["keys", "retire-kek"], ["db", "upgrade"], ["worker"],
    ["memory", "list"], ["memory", "get", "user", "u1", "k"],
])
def test_a_command_outside_a_data_dir_refuses_and_creates_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMPLANE_DATA_DIR", raising=False)
    monkeypatch.delenv("MEMPLANE_DATABASE_URL", raising=False)
    code, out, err = _run({}, *command)
    assert code == 2
    assert out == ""
    assert err == (
        f"memplane: there is no memplane data dir at {tmp_path.resolve() / '.memplane'}, "
        "so this command would work on a new, empty database. Run it from the directory "
        "where `memplane serve` created .memplane, name the data dir with --data-dir PATH "
        "(before the command) or MEMPLANE_DATA_DIR, or pass --init to create a new one "
        "there.\n")
    assert list(tmp_path.iterdir()) == []


def test_init_creates_a_data_dir_that_later_commands_find_without_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMPLANE_DATA_DIR", raising=False)
    data_dir = tmp_path / "elsewhere"
    code, out, err = _run({"MEMPLANE_ADMIN_KEY": ADMIN}, "--data-dir", str(data_dir), "--init",
                          "keys", "create", "--role", "agent")
    assert code == 0, err
    assert f"memplane: created a new data dir at {data_dir.resolve()}\n" in err
    assert out.strip().splitlines()[-1].startswith("mp_")
    assert (data_dir / ".memplane-data-dir").is_file()
    code, out, err = _run({}, "--data-dir", str(data_dir), "verify")
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["clean"] is True
    code, _, err = _run({"MEMPLANE_DATA_DIR": str(data_dir)}, "memory", "list")
    assert code == 0, err
    # A data dir from before the marker existed is recognised by its database.
    (data_dir / ".memplane-data-dir").unlink()
    code, _, err = _run({"MEMPLANE_DATA_DIR": str(data_dir)}, "memory", "list")
    assert code == 0, err


def test_version_is_the_package_version() -> None:
    code, out, _ = _run({}, "--version")
    assert (code, out) == (0, f"memplane {memplane.__version__}\n")
    from importlib.metadata import version

    assert memplane.__version__ == version("memplane")


@pytest.mark.parametrize(("args", "message"), [
    (["memory", "set", "user", "u1", "k", "fr"],
     "'fr' is not JSON; quote a string ('\"fr\"') or pass --text"),
    (["memory", "set", "galaxy", "u1", "k", "1"], "'galaxy' is not a scope; use one of"),
    (["memory", "set", "user", "u1", "k", "1", "--importance", "9"],
     "importance: Input should be less than or equal to 5"),
    (["memory", "get", "user", "u1", "k", "--tenant", "nope"], "'nope' is not a tenant id"),
    (["memory", "list", "--tenant", str(uuid.UUID(int=7))], "memplane: no such tenant"),
])
def test_bad_memory_command_input_is_a_sentence(tmp_path: Path, args: list[str],
                                                message: str) -> None:
    env = {"MEMPLANE_DATA_DIR": str(tmp_path / "d"), "MEMPLANE_ADMIN_KEY": ADMIN}
    code, _, err = _run(env, "--init", *args)
    assert code in (1, 2)
    assert message in " ".join(err.replace("│", " ").split())
    assert "Traceback" not in err
