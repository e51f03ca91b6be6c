"""`pip install memplane` with no extra runs every CLI command on the embedded default, and a
setting that needs an extra which is not installed says which one to install.

The extras are hidden from a child Python (sys.modules[name] = None makes importing them fail),
as if only the base install were there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from control_plane.db.engine import make_engine

_EXTRAS = ("psycopg", "boto3", "botocore", "google.cloud.storage", "azure.storage.blob")
_BASE_ONLY = (
    "import sys\n"
    f"for name in {_EXTRAS!r}:\n"
    "    sys.modules[name] = None  # importing it now raises ImportError\n"
    "sys.argv[0] = 'memplane'\n"
    "from memplane.cli import main\n"
    "main()\n"
)
ROOT = Path(__file__).resolve().parents[2]


def _env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's code, whatever the current directory
    env["COLUMNS"] = "200"
    return {**env, **settings}


def _memplane(cwd: Path, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _BASE_ONLY, *args], cwd=cwd, text=True,
                          capture_output=True, env=_env(**settings), timeout=120)


_MANY = (
    "import json, sys\n"
    f"for name in {_EXTRAS!r}:\n"
    "    sys.modules[name] = None\n"
    "from typer.testing import CliRunner\n"
    "from memplane.cli import app\n"
    "results = []\n"
    "for args in json.loads(sys.argv[1]):\n"
    "    done = CliRunner().invoke(app, args)\n"
    "    results.append([args, done.exit_code, done.stdout, done.stderr])\n"
    "    if done.exit_code:\n"
    "        break\n"
    "print(json.dumps(results))\n"
)


def test_every_cli_command_runs_without_any_extra(tmp_path: Path) -> None:
    commands = [
        ["--version"], ["--init", "keys", "create", "--role", "agent"],
        ["memory", "set", "user", "u1", "lang", '"fr"'], ["memory", "get", "user", "u1", "lang"],
        ["memory", "list", "--json"], ["verify"], ["reconcile"], ["audit", "verify"],
        ["keys", "rotate"], ["keys", "retire-kek"], ["db", "upgrade"],
        ["memory", "delete", "user", "u1", "lang"],
        # These talk to a server: tests/packaging/test_wheel.py runs them against one.
        ["export", "--help"], ["erase", "--help"], ["receipt", "verify", "--help"],
        ["audit", "list", "--help"],
    ]
    done = subprocess.run([sys.executable, "-c", _MANY, json.dumps(commands)], cwd=tmp_path,
                          text=True, capture_output=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    for args, code, _out, err in results:
        assert code == 0, (args, err[-3000:])
    assert len(results) == len(commands)
    out = {" ".join(args): stdout for args, _, stdout, _ in results}
    assert out["--version"].startswith("memplane ")
    assert out["--init keys create --role agent"].strip().splitlines()[-1].startswith("mp_")
    assert out["memory get user u1 lang"] == '"fr"\n'
    assert [json.loads(line)["key"] for line in out["memory list --json"].splitlines()] \
        == ["lang"]
    assert json.loads(out["verify"].splitlines()[-1])["clean"] is True
    assert json.loads(out["audit verify"].splitlines()[-1])["ok"] is True

    with subprocess.Popen([sys.executable, "-c", _BASE_ONLY, "worker"], cwd=tmp_path,
                          text=True, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                          env=_env()) as worker:
        try:
            assert worker.stderr is not None
            seen = []
            for line in worker.stderr:  # ends at EOF if the worker dies
                seen.append(line)
                if "waiting for jobs" in line:
                    break
            assert "waiting for jobs" in "".join(seen), "".join(seen)[-3000:]
        finally:
            worker.terminate()
            worker.wait(timeout=30)


_INSTALL = "install it with: pip install 'memplane[{}]'"


@pytest.mark.parametrize(("settings", "command", "message"), [
    ({"MEMPLANE_DATABASE_URL": "postgresql://mp:Secret-pw-0001@127.0.0.1:1/mp",
      "MEMPLANE_SERVER_KEY": "5c1e0d9a7b3f48e2a6d4c8b0f2e9a1d7"}, ["db", "upgrade"],
     "a PostgreSQL database needs the psycopg driver, which is not installed; "
     + _INSTALL.format("postgres")),
    ({"MEMPLANE_DATABASE_URL": "postgresql+psycopg://mp:Secret-pw-0001@127.0.0.1:1/mp",
      "MEMPLANE_SERVER_KEY": "5c1e0d9a7b3f48e2a6d4c8b0f2e9a1d7",
      "MEMPLANE_DEFAULT_BUCKET_URL": "file:///nonexistent/bucket"}, ["serve"],
     "a PostgreSQL database needs the psycopg driver, which is not installed; "
     + _INSTALL.format("postgres")),
    ({"MEMPLANE_DEFAULT_BUCKET_URL": "s3://bucket?region=eu-west-1"}, ["serve"],
     "the s3 backend needs a library that is not installed (boto3); " + _INSTALL.format("s3")),
    ({"MEMPLANE_DEFAULT_BUCKET_URL": "gs://bucket"}, ["--init", "verify"],
     "the gcs backend needs a library that is not installed (google.cloud.storage); "
     + _INSTALL.format("gcs")),
    ({"MEMPLANE_DEFAULT_BUCKET_URL": "az://c?account_url=https://a.blob.core.windows.net"},
     ["--init", "memory", "list"],
     "the azure backend needs a library that is not installed (azure.storage.blob); "
     + _INSTALL.format("azure")),
    ({"MEMPLANE_KEK_PROVIDER": "aws-kms", "MEMPLANE_KEK_AWS_KEY_ID": "alias/memplane"},
     ["--init", "keys", "rotate"],
     "MEMPLANE_KEK_PROVIDER=aws-kms needs boto3, which is not installed; "
     + _INSTALL.format("s3")),
])
def test_a_setting_whose_extra_is_missing_names_the_extra(
        tmp_path: Path, settings: dict[str, str], command: list[str], message: str) -> None:
    done = _memplane(tmp_path, *command, **settings)
    assert done.returncode == 1, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert lines[-1] == f"memplane: {message}"
    assert "Traceback" not in done.stderr
    assert "Secret-pw-0001" not in done.stdout + done.stderr


def test_a_bad_setting_is_a_sentence_naming_it(tmp_path: Path) -> None:
    done = _memplane(tmp_path, "db", "upgrade",
                     MEMPLANE_DATABASE_URL="postgresql://mp@127.0.0.1:1/mp")
    assert done.returncode == 2
    assert done.stderr == ("memplane: MEMPLANE_SERVER_KEY must be a generated random key of at "
                           "least 16 bytes (hex or base64; not a passphrase or a pattern) when "
                           "MEMPLANE_DATABASE_URL points at a shared database; generate one "
                           "with: python -c 'import secrets; print(secrets.token_hex(32))'\n")


def test_a_postgresql_url_keeps_its_password() -> None:
    # str(URL) masks the password as *** in SQLAlchemy 2: the engine must not connect with it.
    engine = make_engine("postgresql://mp:Secret-pw-0001@127.0.0.1:1/mp")
    try:
        assert engine.url.drivername == "postgresql+psycopg"
        assert engine.url.password == "Secret-pw-0001"
    finally:
        engine.dispose()
