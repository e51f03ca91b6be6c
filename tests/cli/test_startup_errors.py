"""A misconfigured database or default bucket stops `memplane serve` and `memplane db upgrade`
with one sentence naming the fix and exit code 2, before "serving" is printed: the real CLI
run as a subprocess against the suite's PostgreSQL (a role with a password, a missing role,
an unmigrated database, a port nobody listens on) and real buckets (a directory, moto)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.emulators import MotoServer, free_port
from tests.support.postgres import PostgresCluster


@pytest.fixture(scope="module")
def postgres(postgres: object) -> PostgresCluster:
    """The suite's own cluster (its port and roles are named in the expected sentences)."""
    if not isinstance(postgres, PostgresCluster):
        pytest.skip("needs the suite's own PostgreSQL cluster, not MEMPLANE_TEST_DATABASE_URL")
    return postgres

MEMPLANE = Path(sys.executable).with_name("memplane")
SERVER_KEY = "5c1e0d9a7b3f48e2a6d4c8b0f2e9a1d7"
PASSWORD = "Right-pw-7f3a9c"  # the role's password
WRONG = "Wrong-pw-2b8e41"


def run(tmp_path: Path, *command: str, **env: str) -> subprocess.CompletedProcess[str]:
    data_dir = tmp_path / "data"
    data_dir.mkdir(exist_ok=True)
    (data_dir / ".memplane-data-dir").touch()
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")}
    return subprocess.run(
        [str(MEMPLANE), *command], cwd=tmp_path, text=True, capture_output=True, timeout=120,
        env={**base, "MEMPLANE_DATA_DIR": str(data_dir), "MEMPLANE_SERVER_KEY": SERVER_KEY,
             "MEMPLANE_DEFAULT_BUCKET_URL": f"file://{tmp_path / 'bucket'}", **env})


def refused(done: subprocess.CompletedProcess[str], sentence: str) -> None:
    """Exit 2, nothing on stdout, one line on stderr: the sentence; no traceback."""
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.splitlines() == [f"memplane: {sentence}"], done.stderr[-3000:]
    assert done.stdout == ""
    assert "Traceback" not in done.stderr and "serving" not in done.stderr


@pytest.fixture(scope="module")
def password_role(postgres: PostgresCluster) -> str:
    """A role that logs in with a password over TCP (the suite's own roles are trusted);
    returns the URL of its database with the right password."""
    import psycopg

    hba = postgres.data / "pg_hba.conf"
    rule = "host all memplane_pw 127.0.0.1/32 scram-sha-256\n"
    if rule not in hba.read_text():
        hba.write_text(rule + hba.read_text())
    admin = f"postgresql://postgres@127.0.0.1:{postgres.port}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'memplane_pw'").fetchone() is None:
            conn.execute(f"CREATE ROLE memplane_pw LOGIN PASSWORD '{PASSWORD}'")
            conn.execute("CREATE DATABASE memplane_pw OWNER memplane_pw")
        conn.execute("SELECT pg_reload_conf()")
    return f"postgresql+psycopg://memplane_pw:{PASSWORD}@127.0.0.1:{postgres.port}/memplane_pw"


@pytest.mark.parametrize("command", [["db", "upgrade"], ["serve"]])
def test_a_wrong_password_is_one_sentence(tmp_path: Path, password_role: str,
                                          command: list[str]) -> None:
    url = password_role.replace(PASSWORD, WRONG)
    done = run(tmp_path, *command, MEMPLANE_DATABASE_URL=url)
    port = url.split(":")[-1].split("/")[0]
    refused(done, f"cannot reach 127.0.0.1:{port}/memplane_pw: password authentication "
                  'failed for user "memplane_pw"')
    assert WRONG not in done.stderr and PASSWORD not in done.stderr


def test_serve_before_db_upgrade_names_the_command_then_upgrade_lets_it_by(
        tmp_path: Path, postgres: PostgresCluster) -> None:
    url = postgres.create_database()
    done = run(tmp_path, "serve", MEMPLANE_DATABASE_URL=url)
    refused(done, f"the database at {url} is not migrated: run `memplane db upgrade`")
    upgraded = run(tmp_path, "db", "upgrade", MEMPLANE_DATABASE_URL=url)
    assert upgraded.returncode == 0, upgraded.stderr[-3000:]
    assert upgraded.stdout.startswith("database migrations: 0 → ")


def test_the_password_is_masked_when_the_url_is_shown(tmp_path: Path,
                                                      password_role: str) -> None:
    import psycopg

    admin = password_role.replace("memplane_pw:" + PASSWORD, "postgres").replace(
        "postgresql+psycopg", "postgresql")
    with psycopg.connect(admin.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS memplane_pw_empty")
        conn.execute("CREATE DATABASE memplane_pw_empty OWNER memplane_pw")
    url = password_role + "_empty"
    done = run(tmp_path, "serve", MEMPLANE_DATABASE_URL=url)
    refused(done, f"the database at {url.replace(PASSWORD, '***')} is not migrated: run "
                  "`memplane db upgrade`")


def test_a_missing_role_is_one_sentence(tmp_path: Path, postgres: PostgresCluster) -> None:
    url = postgres.url().replace("postgres@", "nobody:Nobody-pw-1@")
    done = run(tmp_path, "db", "upgrade", MEMPLANE_DATABASE_URL=url)
    refused(done, f'cannot reach 127.0.0.1:{postgres.port}/postgres: role "nobody" does not '
                  "exist")
    assert "Nobody-pw-1" not in done.stderr


def test_a_server_that_is_down_is_one_sentence(tmp_path: Path) -> None:
    port = free_port()
    url = f"postgresql+psycopg://mp:Secret-pw-0001@127.0.0.1:{port}/mp"
    done = run(tmp_path, "serve", MEMPLANE_DATABASE_URL=url)
    refused(done, f"cannot reach 127.0.0.1:{port}/mp: connection refused (is PostgreSQL "
                  "running there, on that port?)")
    assert "Secret-pw-0001" not in done.stderr


EXAMPLE = "postgresql+psycopg://user:password@host:5432/dbname"


@pytest.mark.parametrize(("url", "sentence"), [
    ("postgres://mp:Secret-pw-0001@db:5432/mp",
     f"postgres:// is not a driver memplane loads: use postgresql+psycopg://… ({EXAMPLE})"),
    ("mysql://mp:Secret-pw-0001@db:3306/mp",
     f"mysql is not supported: memplane runs on PostgreSQL ({EXAMPLE}) or SQLite "
     "(sqlite:///path/to/memplane.db)"),
    ("not a url Secret-pw-0001",
     f"not a database URL: use {EXAMPLE} (or sqlite:///path/to/memplane.db)"),
])
@pytest.mark.parametrize("command", [["db", "upgrade"], ["serve"]])
def test_a_database_url_memplane_cannot_use_is_one_sentence(
        tmp_path: Path, url: str, sentence: str, command: list[str]) -> None:
    done = run(tmp_path, *command, MEMPLANE_DATABASE_URL=url)
    refused(done, f"MEMPLANE_DATABASE_URL: {sentence}")
    assert "Secret-pw-0001" not in done.stderr


@pytest.mark.parametrize("command", [["serve"], ["worker"]])
def test_a_bucket_url_without_a_scheme_is_refused_at_start(tmp_path: Path,
                                                           command: list[str]) -> None:
    done = run(tmp_path, *command, MEMPLANE_DEFAULT_BUCKET_URL="relative/bucket")
    refused(done, "MEMPLANE_DEFAULT_BUCKET_URL relative/bucket has no scheme: write "
                  "file:///absolute/path for a directory, or name the bucket with one of az://, "
                  "azure://, file://, gcs://, gs://, memory://, s3://")


@pytest.mark.parametrize(("where", "reason"), [
    ("/proc/memplane-bucket", "No such file or directory"),
    ("{tmp}/a-file/bucket", "Not a directory"),
])
def test_a_bucket_directory_memplane_cannot_write_is_refused_at_start(
        tmp_path: Path, where: str, reason: str) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    path = where.format(tmp=tmp_path)
    done = run(tmp_path, "serve", MEMPLANE_DEFAULT_BUCKET_URL=f"file://{path}")
    refused(done, f"MEMPLANE_DEFAULT_BUCKET_URL file://{path} is not usable: {reason}; name a "
                  "directory memplane may write (file:///absolute/path) or a bucket")


def test_a_missing_s3_bucket_is_refused_at_start(tmp_path: Path,
                                                 moto_server: MotoServer) -> None:
    url = (f"s3://no-such-bucket/mp?endpoint_url={moto_server.endpoint}&region=us-east-1"
           "&access_key_id=test&secret_access_key=Secret-key-0001")
    done = run(tmp_path, "serve", MEMPLANE_DEFAULT_BUCKET_URL=url)
    shown = url.replace("Secret-key-0001", "***").replace("access_key_id=test",
                                                           "access_key_id=***")
    refused(done, f"MEMPLANE_DEFAULT_BUCKET_URL {shown} does not "
                  "take a write, read and delete: the bucket or container does not exist; "
                  "create it first")
    assert "Secret-key-0001" not in done.stderr
