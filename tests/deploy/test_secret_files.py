"""Secrets through files, as the compose file and the Helm chart deliver them.

- MEMPLANE_BOOTSTRAP_KEY_FILE: a real `memplane serve` on PostgreSQL creating the default
  tenant writes the generated admin key into that new file (mode 0600) and nowhere else: not
  on stdout, not on stderr, not in a log line. An existing file is never overwritten.
- MEMPLANE_<SECRET>_FILE: the settings read the secret from the file.
- `memplane keys generate`: the compose file's first-start step; it makes each missing
  secret file once and never prints a secret.
"""

from __future__ import annotations

import secrets
import stat
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from control_plane.db.engine import make_engine
from control_plane.db.migrate import upgrade
from control_plane.settings import Settings
from tests.support.postgres import PostgresCluster
from tests.support.process import ServerProcess
from tests.support.service import RECEIPT_KEY


def production_env(postgres: PostgresCluster, data_dir: Path, key_file: Path) -> dict[str, str]:
    url = postgres.create_database()
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return {
        "MEMPLANE_DATABASE_URL": url, "MEMPLANE_SERVER_KEY": secrets.token_hex(32),
        "MEMPLANE_RECEIPT_SIGNING_KEY": RECEIPT_KEY, "MEMPLANE_DATA_DIR": str(data_dir),
        "MEMPLANE_DEFAULT_BUCKET_URL": f"file://{data_dir / 'bucket'}",
        "MEMPLANE_BOOTSTRAP_KEY_FILE": str(key_file),
        "MEMPLANE_LOG_LEVEL": "DEBUG",  # whatever is logged, the key must not be
        "MEMPLANE_RUN_JOBS": "false", "MEMPLANE_EMBED_ON_WRITE": "false",
    }


def status_with(server: ServerProcess, key: str) -> int:
    response = httpx.get(f"{server.base_url}/v1/memories/user/u1/no-such-key", timeout=10,
                         headers={"Authorization": f"Bearer {key}"})
    return response.status_code


@pytest.mark.slow
def test_first_start_writes_the_admin_key_into_the_file_and_never_prints_it(
        postgres: PostgresCluster, tmp_path: Path) -> None:
    key_file = tmp_path / "secrets" / "admin.key"
    output = tmp_path / "server.out"
    server = ServerProcess(production_env(postgres, tmp_path / "data", key_file),
                           output=output)
    server.start(timeout=60)
    try:
        key = key_file.read_text().strip()
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert key.startswith("mp_") and len(key) >= 32
        assert status_with(server, key) == 404  # the key is the tenant's: a plain not-found
        assert status_with(server, "mp_" + secrets.token_urlsafe(32)) == 401
    finally:
        server.stop()
    text = output.read_text()
    assert key not in text
    assert key[3:15] not in text  # nor any recognisable part of it
    assert f"created the default tenant; its admin key is in {key_file} (mode 0600)" in text
    # A second start finds the tenant: no new key, the file is left as it is.
    server.start(timeout=60)
    server.stop()
    assert key_file.read_text().strip() == key
    assert output.read_text().count("created the default tenant") == 1


@pytest.mark.slow
def test_an_existing_bootstrap_key_file_is_never_overwritten(
        postgres: PostgresCluster, tmp_path: Path) -> None:
    key_file = tmp_path / "admin.key"
    key_file.write_text("an earlier key the operator still needs\n")
    output = tmp_path / "server.out"
    server = ServerProcess(production_env(postgres, tmp_path / "data", key_file),
                           output=output)
    try:
        with pytest.raises(RuntimeError, match="memplane serve exited"):
            server.start(timeout=60)
    finally:
        server.stop()
    assert key_file.read_text() == "an earlier key the operator still needs\n"
    assert f"{key_file} already exists; move it away" in output.read_text()
    assert "mp_" not in output.read_text()
    # No tenant was committed without its key reaching the file: once the file is moved
    # away, the next start creates the tenant and hands its key over.
    key_file.unlink()
    server.start(timeout=60)
    try:
        key = key_file.read_text().strip()
        assert status_with(server, key) == 404
    finally:
        server.stop()
    assert key not in output.read_text()


def test_secrets_are_read_from_their_files(tmp_path: Path) -> None:
    values = {"server_key": secrets.token_hex(32), "receipt_signing_key": RECEIPT_KEY,
              "admin_key": "mp_" + secrets.token_urlsafe(32),
              "metrics_token": secrets.token_urlsafe(32)}
    for name, value in values.items():
        (tmp_path / name).write_text(value + "\n")
    settings = Settings(database_url="postgresql+psycopg://m@db/m",
                        **{f"{name}_file": tmp_path / name for name in values})
    assert {name: getattr(settings, name).get_secret_value() for name in values} == values

    with pytest.raises(ValidationError, match="set MEMPLANE_SERVER_KEY or "
                                              "MEMPLANE_SERVER_KEY_FILE, not both"):
        Settings(database_url="postgresql+psycopg://m@db/m", server_key=values["server_key"],
                 server_key_file=tmp_path / "server_key")
    with pytest.raises(ValidationError, match=r"MEMPLANE_METRICS_TOKEN_FILE names .*missing, "
                                              r"which cannot be read"):
        Settings(metrics_token_file=tmp_path / "missing")
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValidationError, match=r"MEMPLANE_ADMIN_KEY_FILE names .*empty, "
                                              r"which is empty"):
        Settings(admin_key_file=tmp_path / "empty")


def test_keys_generate_makes_each_secret_once_and_never_prints_one(tmp_path: Path) -> None:
    from control_plane.signing import random_bytes_in, signing_key
    from memplane.cli import app

    directory = tmp_path / "secrets"
    runner = CliRunner()
    first = runner.invoke(app, ["keys", "generate", "--dir", str(directory)])
    assert first.exit_code == 0, first.output
    names = ["admin.key", "metrics.token", "receipt-signing.key", "server.key"]
    assert sorted(p.name for p in directory.iterdir()) == names
    made = {name: (directory / name).read_text() for name in names}
    for name in names:
        assert stat.S_IMODE((directory / name).stat().st_mode) == 0o600
        assert made[name].strip() not in first.output
        assert f"wrote {directory / name}" in first.output.replace("\n", "")
    settings = Settings(database_url="postgresql+psycopg://m@db/m",
                        server_key_file=directory / "server.key",
                        receipt_signing_key_file=directory / "receipt-signing.key",
                        admin_key_file=directory / "admin.key",
                        metrics_token_file=directory / "metrics.token")
    assert settings.server_key is not None
    assert random_bytes_in(settings.server_key.get_secret_value()) == 32
    assert len(signing_key(settings).public_raw) == 32

    (directory / "metrics.token").unlink()
    second = runner.invoke(app, ["keys", "generate", "--dir", str(directory)])
    assert second.exit_code == 0, second.output
    flat = second.output.replace("\n", "")
    assert f"wrote {directory / 'metrics.token'}" in flat
    assert [n for n in names if f"kept {directory / n}" in flat] == [
        "admin.key", "receipt-signing.key", "server.key"]
    for name in ("admin.key", "receipt-signing.key", "server.key"):
        assert (directory / name).read_text() == made[name]  # kept, byte for byte
    assert (directory / "metrics.token").read_text() != made["metrics.token"]


def test_keys_create_on_a_new_database_hands_the_admin_key_over_in_the_file(
        tmp_path: Path) -> None:
    """`memplane keys create` makes the default tenant when there is none: with
    MEMPLANE_BOOTSTRAP_KEY_FILE its admin key goes to the file, not to the terminal."""
    from control_plane.identity import authenticate
    from control_plane.runtime import Runtime
    from memplane.cli import app

    key_file = tmp_path / "admin.key"
    env = {"MEMPLANE_DATA_DIR": str(tmp_path / "data"),
           "MEMPLANE_BOOTSTRAP_KEY_FILE": str(key_file)}
    result = CliRunner().invoke(app, ["--init", "keys", "create", "--role", "agent"], env=env)
    assert result.exit_code == 0, result.output
    admin_key = key_file.read_text().strip()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert admin_key not in result.output
    assert f"its admin key is in {key_file}" in result.output.replace("\n", "")
    agent_key = result.output.strip().splitlines()[-1]
    runtime = Runtime(Settings(data_dir=tmp_path / "data"))
    try:
        with runtime.sessions() as session:
            roles = [authenticate(session, f"Bearer {k}").role for k in (admin_key, agent_key)]
    finally:
        runtime.close()
    assert roles == ["admin", "agent"]
