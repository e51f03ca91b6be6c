"""`memplane doctor` run as a subprocess against the suite's PostgreSQL, moto's S3 and KMS
and local directories: a deployment done right passes every check (exit 0), and each thing
a new deployment gets wrong is named, with its fix, at its level (exit 1 warn, 2 fail)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from control_plane import doctor
from control_plane.db.engine import make_engine
from control_plane.db.migrate import upgrade
from control_plane.settings import Settings
from tests.support.emulators import MOTO_KEY_ID, MOTO_REGION, MOTO_SECRET, MotoServer
from tests.support.postgres import PostgresCluster


@pytest.fixture(scope="module")
def postgres(postgres: object) -> PostgresCluster:
    """The suite's own cluster (its port and roles are named in the expected sentences)."""
    if not isinstance(postgres, PostgresCluster):
        pytest.skip("needs the suite's own PostgreSQL cluster, not MEMPLANE_TEST_DATABASE_URL")
    return postgres

MEMPLANE = Path(sys.executable).with_name("memplane")
METRICS_TOKEN = "Metrics-token-" + secrets.token_hex(8)


def migrated(postgres: PostgresCluster) -> str:
    url = postgres.create_database()
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


def s3_url(moto: MotoServer, bucket: str, region: str = MOTO_REGION) -> str:
    return (f"s3://{bucket}/mp?endpoint_url={moto.endpoint}&region={region}"
            f"&access_key_id={MOTO_KEY_ID}&secret_access_key={MOTO_SECRET}")


def kms_key(moto: MotoServer) -> str:
    kms = boto3.client("kms", endpoint_url=moto.endpoint, region_name=MOTO_REGION,
                       aws_access_key_id=MOTO_KEY_ID, aws_secret_access_key=MOTO_SECRET)
    return str(kms.create_key(Description="doctor test")["KeyMetadata"]["Arn"])


def production(moto: MotoServer, database: str, bucket: str, key_id: str) -> dict[str, str]:
    """Settings of a deployment done right."""
    return {"MEMPLANE_DATABASE_URL": database, "MEMPLANE_SERVER_KEY": secrets.token_hex(32),
            "MEMPLANE_DEFAULT_BUCKET_URL": s3_url(moto, bucket),
            "MEMPLANE_KEK_PROVIDER": "aws-kms", "MEMPLANE_KEK_AWS_KEY_ID": key_id,
            "MEMPLANE_KEK_AWS_ENDPOINT_URL": moto.endpoint,
            "MEMPLANE_KEK_AWS_REGION": MOTO_REGION, "MEMPLANE_KEK_AWS_ACCESS_KEY_ID": MOTO_KEY_ID,
            "MEMPLANE_KEK_AWS_SECRET_ACCESS_KEY": MOTO_SECRET,
            "MEMPLANE_METRICS_TOKEN": METRICS_TOKEN,
            "MEMPLANE_PUBLIC_URL": "https://memory.example.com"}


def run(tmp_path: Path, *options: str, **env: str) -> tuple[int, dict[str, Any], str]:
    """Exit code, the --json answer (checks by name) and the plain output."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")}
    full = {**base, "MEMPLANE_DATA_DIR": str(tmp_path / "data"), **env}

    def doctor_run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(MEMPLANE), "doctor", *options, *extra], cwd=tmp_path,
                              text=True, capture_output=True, timeout=120, env=full)

    answer, plain = doctor_run("--json"), doctor_run()
    assert answer.returncode == plain.returncode, plain.stdout + plain.stderr
    assert "Traceback" not in answer.stderr + plain.stderr
    found = json.loads(answer.stdout)
    found["by_name"] = {c["name"]: c for c in found["checks"]}
    for secret in (METRICS_TOKEN, env.get("MEMPLANE_SERVER_KEY"), MOTO_SECRET + "&"):
        assert not secret or secret not in answer.stdout + plain.stdout
    return answer.returncode, found, plain.stdout


def statuses(found: dict[str, Any]) -> dict[str, str]:
    return {name: check["status"] for name, check in found["by_name"].items()}


def test_a_deployment_done_right_passes_every_check(
        tmp_path: Path, postgres: PostgresCluster, moto_server: MotoServer) -> None:
    moto_server.create_bucket("doctor-good")
    env = production(moto_server, migrated(postgres), "doctor-good", kms_key(moto_server))
    code, found, plain = run(tmp_path, **env)
    assert (code, found["status"]) == (0, "ok"), plain
    assert set(statuses(found).values()) == {"ok"}
    assert list(found["by_name"]) == ["database", "server key", "bucket", "kek provider",
                                      "clock", "connections", "metrics token", "tls"]
    assert found["by_name"]["connections"]["summary"] == (
        "1 process(es) x 30 connections (MEMPLANE_DB_POOL_SIZE 20 + 10 at a peak) = 30 of "
        "the 197 PostgreSQL allows (max_connections 200)")
    assert found["by_name"]["bucket"]["summary"].endswith(f"region {MOTO_REGION}")
    assert [line.split()[0] for line in plain.splitlines()] == ["ok"] * 8


def test_each_mistake_is_named_with_its_fix(
        tmp_path: Path, postgres: PostgresCluster, moto_server: MotoServer) -> None:
    env = production(moto_server, postgres.create_database(), "doctor-no-such-bucket",
                     "arn:aws:kms:us-east-1:123456789012:key/no-such-key")
    env.update(MEMPLANE_SERVER_KEY=secrets.token_hex(16), MEMPLANE_METRICS_TOKEN="",
               MEMPLANE_PUBLIC_URL="http://memory.example.com")
    code, found, plain = run(tmp_path, "--processes", "7", **env)
    assert (code, found["status"]) == (2, "fail"), plain
    assert statuses(found) == {
        "database": "fail", "server key": "warn", "bucket": "fail", "kek provider": "fail",
        "clock": "ok", "connections": "fail", "metrics token": "warn", "tls": "fail"}
    by_name = found["by_name"]
    assert by_name["database"]["fix"] == "run `memplane db upgrade`"
    assert by_name["server key"]["summary"] == "16 random bytes (32 recommended)"
    assert by_name["bucket"]["summary"].endswith(
        "does not take a write, read and delete: the bucket or container does not exist; "
        "create it first")
    assert "NotFoundException" in by_name["kek provider"]["summary"]
    assert by_name["connections"]["summary"].startswith("7 process(es) x 30 connections")
    assert by_name["tls"]["summary"] == (
        "clients reach http://memory.example.com: API keys and memory cross the network "
        "unencrypted")
    assert all(check["fix"] for check in found["checks"] if check["status"] != "ok")
    assert "fix: run `memplane db upgrade`" in plain


def test_an_unreachable_database_fails_and_leaves_its_checks_unchecked(
        tmp_path: Path, postgres: PostgresCluster, moto_server: MotoServer) -> None:
    moto_server.create_bucket("doctor-down")
    url = postgres.url().replace("postgres@", "nobody:Nobody-pw-1@")
    env = production(moto_server, url, "doctor-down", kms_key(moto_server))
    code, found, plain = run(tmp_path, **env)
    assert (code, statuses(found)) == (2, {
        "database": "fail", "server key": "ok", "bucket": "ok", "kek provider": "ok",
        "clock": "warn", "connections": "warn", "metrics token": "ok", "tls": "ok"}), plain
    assert found["by_name"]["database"]["summary"] == (
        f'cannot reach 127.0.0.1:{postgres.port}/postgres: role "nobody" does not exist')
    assert "Nobody-pw-1" not in plain


def test_a_bucket_in_another_region_than_declared_fails(
        tmp_path: Path, postgres: PostgresCluster, moto_server: MotoServer) -> None:
    moto_server.create_bucket("doctor-region")  # in us-east-1
    env = production(moto_server, migrated(postgres), "doctor-region", kms_key(moto_server))
    env["MEMPLANE_DEFAULT_BUCKET_URL"] = s3_url(moto_server, "doctor-region", "eu-west-1")
    code, found, _ = run(tmp_path, **env)
    bucket = found["by_name"]["bucket"]
    assert (code, bucket["status"]) == (2, "fail")
    assert bucket["summary"].endswith("region us-east-1, but the URL declares region "
                                      "eu-west-1")


def test_a_refused_setting_is_a_failed_check(tmp_path: Path) -> None:
    code, found, plain = run(tmp_path, MEMPLANE_DATABASE_URL="postgres://mp:pw@db/mp",
                             MEMPLANE_SERVER_KEY=secrets.token_hex(32))
    assert (code, found["checks"]) == (2, [{
        "name": "settings", "status": "fail", "fix": "fix the setting",
        "summary": "MEMPLANE_DATABASE_URL: postgres:// is not a driver memplane loads: use "
                   "postgresql+psycopg://… (postgresql+psycopg://user:password@host:5432/dbname)"}])


def test_the_embedded_default_warns_only_of_what_a_public_server_needs(tmp_path: Path) -> None:
    code, found, _ = run(tmp_path)
    assert (code, statuses(found)) == (1, {
        "database": "ok", "server key": "ok", "bucket": "ok", "kek provider": "ok",
        "clock": "ok", "connections": "ok", "metrics token": "warn", "tls": "warn"})
    assert not (tmp_path / "data").exists()  # the doctor creates nothing


def test_a_local_bucket_memplane_cannot_write_fails(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    code, found, _ = run(tmp_path, MEMPLANE_DEFAULT_BUCKET_URL=f"file://{tmp_path}/a-file/b")
    assert (code, found["by_name"]["bucket"]["status"]) == (2, "fail")


@pytest.mark.parametrize(("shift", "status"), [(0.0, "ok"), (2.0, "warn"), (-30.0, "fail")])
def test_clock_skew_against_the_database(postgres: PostgresCluster, tmp_path: Path,
                                         shift: float, status: str) -> None:
    settings = Settings(data_dir=tmp_path, database_url=postgres.url(),
                        server_key=secrets.token_hex(32))
    checks = doctor.run(settings, clock=lambda: time.time() + shift)
    clock = next(c for c in checks if c.name == "clock")
    assert clock.status == status, clock
