"""The distribution builds as an sdist and a wheel (the wheel from the sdist, as pip would),
and the wheel installed alone into a clean virtualenv (no extra, no test tools, pinned by
requirements/dev.lock) serves the embedded default: set and get through the SDK, then export
and erase through the CLI, from that venv only."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from tests.support.emulators import free_port

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "mp_wheel_smoke_admin_key_0123456789abc"
# Kept out of the copy that is built: they are not part of the distribution.
_NOT_SHIPPED = shutil.ignore_patterns(".git", ".venv", ".cache", ".memplane", "__pycache__",
                                      "*.egg-info", "build", "dist", ".*_cache", ".hypothesis",
                                      "tests", "bench", ".schemathesis", "node_modules")

_CONSOLE = """
import sys, urllib.request
for path in ("/console/", "/console/console.js"):
    with urllib.request.urlopen(sys.argv[1] + path) as answer:
        print(answer.status)
"""

_SMOKE = """
import json, sys
import memplane

url, key = sys.argv[1], sys.argv[2]
assert memplane.__file__.startswith(sys.prefix), memplane.__file__  # the installed wheel
with memplane.Client(url, key) as client:
    client.memory.set(scope="user", scope_ref="u1", key="lang", value="fr", user_id="u1")
    client.memory.set(scope="user", scope_ref="u1", key="notes", value={"a": [1, 2]},
                      user_id="u1", tags=["smoke"], ttl_days=30)
    got = client.memory.get(scope="user", scope_ref="u1", key="lang").value
    notes = client.memory.get(scope="user", scope_ref="u1", key="notes").value
print(json.dumps({"lang": got, "notes": notes}))
"""

_AFTER = """
import json, sys
import memplane

url, key = sys.argv[1], sys.argv[2]
with memplane.Client(url, key) as client:
    try:
        client.memory.get(scope="user", scope_ref="u1", key="lang")
        print(json.dumps({"gone": False}))
    except memplane.NotFound:
        print(json.dumps({"gone": True, "audit_ok": client.audit.verify().ok}))
    open("key.pem", "w").write(client.receipts.public_key())
"""


def _run(argv: list[str | Path], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in argv], text=True, capture_output=True,
                          timeout=600, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-3000:])
    return done  # type: ignore[no-any-return]


@pytest.mark.slow
def test_built_wheel_in_a_clean_venv_serves_sets_gets_exports_and_erases(
        tmp_path: Path) -> None:
    try:
        import build  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("the build module is in [dev]: run scripts/bootstrap")

    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=_NOT_SHIPPED)
    dist = tmp_path / "dist"
    # Without --sdist/--wheel, build makes the sdist and then the wheel from the unpacked sdist.
    _run([sys.executable, "-m", "build", "--outdir", dist, source])
    version = re.search(r'__version__ = "([^"]+)"',
                        (ROOT / "memplane" / "_version.py").read_text())
    assert version is not None
    built = sorted(p.name for p in dist.iterdir())
    wheel_name = f"memplane-{version[1]}-py3-none-any.whl"
    assert built == [wheel_name, f"memplane-{version[1]}.tar.gz"]
    with zipfile.ZipFile(dist / wheel_name) as wheel:
        names = wheel.namelist()
    # The migrations ship with the code: the embedded default migrates itself on start.
    assert "control_plane/db/migrations/env.py" in names
    assert any(n.startswith("control_plane/db/migrations/versions/0001") for n in names)
    assert not any(n.startswith("tests/") for n in names)
    # The compliance console ships built (no Node at install time).
    assert {f"control_plane/console/static/{n}" for n in ("index.html", "console.js",
                                                          "console.css")} <= set(names)
    # The license pyproject.toml declares travels with the wheel (and the sdist).
    assert f"memplane-{version[1]}.dist-info/licenses/LICENSE" in names
    with tarfile.open(dist / f"memplane-{version[1]}.tar.gz") as sdist:
        assert f"memplane-{version[1]}/LICENSE" in sdist.getnames()

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    _run([python, "-m", "pip", "install", "--quiet", "-c", ROOT / "requirements" / "dev.lock",
          dist / wheel_name])
    installed = _run([python, "-m", "pip", "list", "--format=json"]).stdout
    names_installed = {p["name"].lower() for p in json.loads(installed)}
    # The base install: no driver, no cloud SDK, no test tool.
    assert not names_installed & {"psycopg", "boto3", "google-cloud-storage",
                                  "azure-storage-blob", "pytest", "moto", "schemathesis"}
    cli = env_dir / "bin" / "memplane"
    assert _run([cli, "--version"]).stdout == f"memplane {version[1]}\n"

    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMPLANE_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(MEMPLANE_ADMIN_KEY=ADMIN, COLUMNS="200")
    url = f"http://127.0.0.1:{port}"
    with subprocess.Popen([cli, "serve", "--port", str(port)], cwd=home, env=env, text=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as server:
        try:
            assert server.stderr is not None
            seen: list[str] = []
            for line in server.stderr:  # ends at EOF if the server dies
                seen.append(line)
                if "Application startup complete" in line:
                    break
            log = "".join(seen)
            assert "Application startup complete" in log, log[-3000:]
            data_dir = (home / ".memplane").resolve()
            assert f"memplane: created a new data dir at {data_dir}\n" in log
            assert (f"memplane: database sqlite:///{data_dir / 'memplane.db'}; "
                    f"bucket file://{data_dir / 'bucket'}\n") in log

            smoke = _run([python, "-c", _SMOKE, url, ADMIN], cwd=home, env=env)
            assert json.loads(smoke.stdout) == {"lang": "fr", "notes": {"a": [1, 2]}}
            console = _run([python, "-c", _CONSOLE, url], cwd=home, env=env)
            assert console.stdout.split() == ["200", "200"]

            exported = _run([cli, "export", "u1", "--out", home / "u1.zip", "--url", url,
                             "--api-key", ADMIN, "--timeout", "120"], cwd=home, env=env)
            assert "2 of 2 memories exported" in exported.stderr
            with zipfile.ZipFile(home / "u1.zip") as archive:
                assert json.loads(archive.read("manifest.json"))["counts"]["exported"] == 2

            erased = _run([cli, "erase", "u1", "--yes", "--receipt-out", home / "r.json",
                           "--url", url, "--api-key", ADMIN, "--timeout", "120"],
                          cwd=home, env=env)
            assert erased.stdout.strip() == str(home / "r.json")
            assert json.loads((home / "r.json").read_text())["counts"]["pointers"] == 2

            after = _run([python, "-c", _AFTER, url, ADMIN], cwd=home, env=env)
            assert json.loads(after.stdout) == {"gone": True, "audit_ok": True}
            checked = _run([cli, "receipt", "verify", home / "r.json", "--public-key",
                            home / "key.pem"], cwd=home, env=env)
            assert "valid: receipt" in checked.stderr
        finally:
            server.terminate()
            server.wait(timeout=30)
