"""The TypeScript SDK (sdks/typescript): it builds (ESM and CommonJS), type-checks, and its
own tests (``node --test``) pass against a ``memplane serve`` their script starts; its API types
are what the app's OpenAPI document generates today; and the packed tarball, installed into an
empty project, runs the seed's examples (examples/seed.ts, compiled) against a live server.

The two tests share sdks/typescript (its node_modules, dist and build directories), so each
holds a file lock for its whole run: pytest-xdist may give them to different workers.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.service import RECEIPT_KEY, Tenant, isolated_database

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdks" / "typescript"

# npm ci, two builds and a server each: minutes on a loaded two-core machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("npm is not installed; .ci/run installs it")
        pytest.skip("npm is not installed")
    return npm


def _run(args: list[str], cwd: Path, timeout: float = 600,
         env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(args)} failed ({done.returncode}):\n{output[-6000:]}"
    return output


@contextmanager
def _prepared() -> Iterator[str]:
    """sdks/typescript with its locked devDependencies installed (npm ci, once per lock file)
    and built, held by this test alone."""
    npm = _npm()
    with open(SDK / ".test.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = SDK / "node_modules" / ".memplane-ci-stamp"
        wanted = (SDK / "package-lock.json").read_text()
        if not stamp.exists() or stamp.read_text() != wanted:
            _run([npm, "ci", "--no-audit", "--no-fund"], SDK)
            stamp.write_text(wanted)
        _run([npm, "run", "build"], SDK)
        yield npm


def test_builds_typechecks_and_passes_its_tests_against_a_live_server() -> None:
    with _prepared() as npm:
        _run([npm, "run", "typecheck"], SDK)
        output = _run([npm, "test"], SDK, timeout=900)
    assert "# fail 0" in output, output[-4000:]
    passed = int(output.rsplit("# pass ", 1)[1].split()[0])
    assert passed >= 30, f"only {passed} tests ran:\n{output[-4000:]}"
    assert (SDK / "dist" / "esm" / "index.d.ts").exists()
    assert json.loads((SDK / "dist" / "cjs" / "package.json").read_text()) == {
        "type": "commonjs"}


@pytest.mark.postgres
def test_its_tests_pass_on_postgresql(request: pytest.FixtureRequest) -> None:
    """The same node tests against ``memplane serve`` on a fresh, migrated PostgreSQL
    database (the script still starts the server; only its database differs)."""
    url = isolated_database("postgres", request)
    env = {"MEMPLANE_DATABASE_URL": url, "MEMPLANE_SERVER_KEY": secrets.token_hex(24),
           "MEMPLANE_RECEIPT_SIGNING_KEY": RECEIPT_KEY}
    with _prepared() as npm:
        output = _run([npm, "test"], SDK, timeout=900, env=env)
    assert "# fail 0" in output, output[-4000:]
    assert int(output.rsplit("# pass ", 1)[1].split()[0]) >= 30, output[-4000:]


def test_api_types_match_the_openapi_document() -> None:
    """src/api-types.ts is regenerated from the app; any difference fails (run
    ``npm run gen:types`` in sdks/typescript and commit the file)."""
    with _prepared() as npm:
        _run([npm, "run", "check:types"], SDK)


@pytest.mark.databases("sqlite")
def test_the_packed_tarball_runs_the_seed_examples(tenant: Tenant,
                                                   tmp_path: Path) -> None:
    with _prepared() as npm:
        packed = _run([npm, "pack", "--ignore-scripts", "--json", "--pack-destination",
                       str(tmp_path)], SDK)
        tarball = tmp_path / json.loads(packed[packed.index("["):])[0]["filename"]
        project = tmp_path / "app"
        project.mkdir()
        (project / "package.json").write_text(json.dumps(
            {"name": "seed-app", "private": True, "type": "module"}))
        _run([npm, "install", "--no-audit", "--no-fund", "--offline", str(tarball)], project)
        installed = json.loads(
            (project / "node_modules" / "@memplane" / "sdk" / "package.json").read_text())
        assert installed["name"] == "@memplane/sdk"
        assert "dependencies" not in installed
        shutil.copy(SDK / "examples" / "seed.ts", project / "seed.ts")
        readme = _readme_ts_blocks()
        for index, block in enumerate(readme):
            (project / f"readme{index}.ts").write_text(block)
        tsc = SDK / "node_modules" / "typescript" / "bin" / "tsc"
        _run(["node", str(tsc), "--module", "nodenext", "--moduleResolution", "nodenext",
              "--target", "es2022", "--strict", "--types", "node", "--typeRoots",
              str(SDK / "node_modules" / "@types"), "--outDir", "out", "seed.ts",
              *(f"readme{index}.ts" for index in range(len(readme)))], project)
    cjs = _run(["node", "-e", "const m = require('@memplane/sdk'); "
                "console.log(typeof m.Memplane, typeof m.verifyReceipt, m.NotFound.name)"],
               project)
    assert cjs.split() == ["function", "function", "NotFound"]
    output = _run(["node", "out/seed.js"], project, timeout=300,
                  env={"MEMPLANE_URL": tenant.stack.base_url,
                       "MEMPLANE_API_KEY": tenant.admin_key})
    lines = output.splitlines()
    assert "preferred_language: Spanish" in lines
    assert "past_issues: [ 'VPN drops', 'Printer jam' ]" in lines
    assert "receipt verified: true" in lines
    assert "after erasure: not found" in lines
    assert "cleared team memories: 1" in lines
    # The README's TypeScript section, as written.
    assert readme
    for index in range(len(readme)):
        printed = _run(["node", f"out/readme{index}.js"], project, timeout=120,
                       env={"MEMPLANE_URL": tenant.stack.base_url,
                            "MEMPLANE_API_KEY": tenant.admin_key})
        assert printed.splitlines()[0].split()[0] == "user", printed
        assert printed.splitlines()[-1].split()[0] == "Spanish", printed


def _readme_ts_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## TypeScript SDK\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```ts\n(.*?)```", section, re.S)


_AWKWARD = {"z": [1, -2, 0, True, False, None], "a": {"é": "ü\u2028\x1f\"\\/", "Z": 10**15},
            "\U0001f600": "astral key", "\uffff": "last of the BMP", "": [], "n": {"": {}},
            "seq": 9007199254740991, "text": "tab\tnew\nline ✓ 日本"}


def test_canonical_form_is_byte_for_byte_the_servers() -> None:
    """The bytes verifyReceipt checks are the bytes control_plane/signing.py signs, for keys
    that sort differently by UTF-16 unit and by code point, escapes, non-ASCII and large ints."""
    from control_plane.signing import canonical

    script = ("const { canonicalReceipt } = require('./dist/cjs/index.js');"
              "const body = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "process.stdout.write(Buffer.from(canonicalReceipt(body)).toString('hex'));")
    with _prepared():
        done = subprocess.run(["node", "-e", script], cwd=SDK, capture_output=True, text=True,
                              input=json.dumps({**_AWKWARD, "signature": "dropped"}),
                              timeout=60)
    assert done.returncode == 0, done.stderr
    assert bytes.fromhex(done.stdout) == canonical(_AWKWARD)
