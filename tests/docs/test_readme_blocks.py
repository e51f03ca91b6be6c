"""Every shell and Python block of the README runs, in order, as written: a new user who pastes
them one after another into one terminal gets what the README says, on the embedded default
and on PostgreSQL with an S3 bucket (the suite's PostgreSQL and moto).

The convention (the README says it too): ```bash, ```sh and ```python blocks run; any other
language (```text, ```ts, ```yaml) does not. A block that must not run is preceded, on the
line right before its fence, by ``<!-- readme-test: skip (reason) -->``, the reason required.
The environment is given the way a user gives it, through variables the README documents:
``PORT`` (where the quickstart's server listens), ``MEMPLANE_DATA_DIR`` and, for the
PostgreSQL variant, the production block's ``MEMPLANE_*`` settings. Blocks run in one
terminal's sense: each one sees what the ones before it exported.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import memplane
from tests.support.emulators import MOTO_KEY_ID, MOTO_REGION, MOTO_SECRET, MotoServer, free_port

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RUN = {"bash", "sh", "python"}
_FENCE = re.compile(r"(?:^<!-- readme-test: skip \((?P<reason>.*?)\) -->\n)?^```(?P<lang>\S*)\n"
                    r"(?P<body>.*?)^```$", re.S | re.M)
# The blocks allowed to be skipped, by what they start with, and no others.
ADMIN = "mp_local_dev_key_0123456789abcdefghij"  # the quickstart's MEMPLANE_ADMIN_KEY
SKIPPED = ["scripts/serve      # run the service", "git clone", "docker build",
           "(cd sdks/typescript && npm ci && npm pack)", "# S3: an access key pair",
           "pip install '.[postgres,s3]'"]


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    line: int
    skip: str | None


def blocks(text: str | None = None) -> list[Block]:
    text = README.read_text(encoding="utf-8") if text is None else text
    return [Block(m["lang"], m["body"], text.count("\n", 0, m.start("body")), m["reason"])
            for m in _FENCE.finditer(text)]


def test_the_convention_finds_blocks_and_their_skip_reasons() -> None:
    sample = ("a\n<!-- readme-test: skip (needs docker (a daemon)) -->\n```bash\ndocker ps\n"
              "```\n\n```python\nprint(1)\n```\n```yaml\nx: 1\n```\n")
    assert blocks(sample) == [Block("bash", "docker ps\n", 3, "needs docker (a daemon)"),
                              Block("python", "print(1)\n", 7, None),
                              Block("yaml", "x: 1\n", 10, None)]


def test_skips_are_few_each_with_a_reason_and_every_marker_is_on_a_block() -> None:
    text = README.read_text(encoding="utf-8")
    found = blocks(text)
    skipped = [b for b in found if b.skip is not None]
    assert text.count("<!-- readme-test: skip (") == len(skipped)  # none stray or misplaced
    assert all(len(b.skip.strip()) >= 20 for b in skipped if b.skip is not None)
    assert [next(s for s in SKIPPED if b.body.startswith(s)) for b in skipped] == SKIPPED
    assert len([b for b in found if b.lang in RUN and b.skip is None]) >= 8


def _kill(groups: list[int]) -> None:
    for group in groups:
        try:
            os.killpg(group, signal.SIGTERM)
        except ProcessLookupError:
            pass


def _run_all(tmp: Path, settings: dict[str, str]) -> dict[int, str]:
    """Run every runnable block in order in a fresh "terminal", check what they left through
    the SDK while their server still runs, and stop it; their outputs by README line."""
    state = tmp / "terminal.sh"
    state.write_text("".join(f"export {k}={v!r}\n" for k, v in settings.items()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")}
    env.update(PATH=f"{ROOT / '.venv' / 'bin'}:{env['PATH']}", COLUMNS="200")
    outputs: dict[int, str] = {}
    groups: list[int] = []
    try:
        for n, block in enumerate(b for b in blocks() if b.lang in RUN and b.skip is None):
            script = tmp / f"block{n}"
            if block.lang == "python":
                script.with_suffix(".py").write_text(block.body)
                command = f"exec {sys.executable} {script.with_suffix('.py')}"
            else:
                command = f"{block.body}\nexport -p > {state}.next && mv {state}.next {state}"
            script.write_text(f"set -euo pipefail\nsource {state}\n{command}\n")
            out, err = tmp / f"block{n}.out", tmp / f"block{n}.err"
            with out.open("w") as stdout, err.open("w") as stderr:
                # Its own process group: the quickstart's server is stopped at the end.
                process = subprocess.Popen(["bash", str(script)], cwd=ROOT, env=env,
                                           stdout=stdout, stderr=stderr,
                                           stdin=subprocess.DEVNULL, start_new_session=True)
                groups.append(process.pid)
                code = process.wait(timeout=300)
            outputs[block.line] = out.read_text()
            assert code == 0, (f"README.md line {block.line} exited {code}:\n{block.body}\n"
                               f"---\n{out.read_text()[-2000:]}\n{err.read_text()[-3000:]}")
            # curl -s prints a refusal's body and succeeds: an answer naming an error fails.
            assert '"error"' not in outputs[block.line], (block.line, outputs[block.line])
        _check(outputs, f"http://localhost:{settings['PORT']}")
    finally:
        _kill(groups)
    # A new user sees no traceback: not from a block, nor from the server the quickstart
    # left running in the background (its log went to the same terminal).
    for n in range(len(groups)):
        for name in (f"block{n}.out", f"block{n}.err"):
            text = (tmp / name).read_text()
            assert "Traceback" not in text, (name, text[-3000:])
    return outputs


def _check(outputs: dict[int, str], url: str) -> None:
    quickstart = outputs[min(outputs)]
    # The PUT answers the pointer, the GET the value with it.
    assert quickstart.count('{"value":"fr","pointer":{') == 1, quickstart[-1000:]
    assert quickstart.startswith('{"id":'), quickstart[:200]
    keys = next(text for text in outputs.values() if '"prefix"' in text)
    assert '"name":"bot"' in keys and '"api_key"' not in keys and "mp_local_dev" not in keys
    seed = next(text for text in outputs.values() if '"kind":"call_summary"' in text)
    assert '"scope_ref":"ent_acme"' in seed and '"agent_id":"support-bot"' in seed
    with memplane.Client(url, ADMIN) as client:
        # The first SDK example sets, appends, reads, deletes and clears user u_123: nothing
        # is left, and every step reached the audit log (rows are listed once sealed).
        assert list(client.memory.iter_pointers(user_id="u_123")) == []
        wanted = ["write", "append", "read", "delete", "key_create", "key_list"]
        deadline = time.monotonic() + 60
        while True:
            operations = [row.operation for row in client.audit.list(limit=1000).items]
            if all(op in operations for op in wanted) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert [op for op in wanted if op not in operations] == []
        assert client.audit.verify().ok


@pytest.mark.timeout(900)
def test_every_block_runs_on_the_embedded_default(tmp_path: Path) -> None:
    _run_all(tmp_path, {"PORT": str(free_port()), "MEMPLANE_DATA_DIR": str(tmp_path / "data")})


@pytest.mark.timeout(900)
def test_every_block_runs_on_postgresql_and_s3(tmp_path: Path, postgres: Any,
                                               moto_server: MotoServer) -> None:
    bucket = f"readme-{uuid.uuid4().hex[:8]}"
    moto_server.create_bucket(bucket)
    settings = {
        "PORT": str(free_port()),
        "MEMPLANE_DATA_DIR": str(tmp_path / "data"),  # the local key ring's home
        "MEMPLANE_DATABASE_URL": postgres.create_database(),
        "MEMPLANE_SERVER_KEY": secrets.token_hex(32),
        "MEMPLANE_RECEIPT_SIGNING_KEY": base64.b64encode(os.urandom(32)).decode(),
        "MEMPLANE_DEFAULT_BUCKET_URL": (f"s3://{bucket}?endpoint_url={moto_server.endpoint}"
                                        f"&region={MOTO_REGION}"),
        "AWS_ACCESS_KEY_ID": MOTO_KEY_ID, "AWS_SECRET_ACCESS_KEY": MOTO_SECRET,
    }
    # As the production block says: once per release, before the servers start.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")}
    upgraded = subprocess.run([str(ROOT / ".venv" / "bin" / "memplane"), "db", "upgrade"],
                              env={**env, **settings}, cwd=tmp_path, text=True,
                              capture_output=True, timeout=300)
    assert upgraded.returncode == 0, upgraded.stderr[-3000:]
    _run_all(tmp_path, settings)
    listed = moto_server.client().list_objects_v2(Bucket=bucket)
    assert listed.get("KeyCount", 0) > 10  # the memories, events and entries went there
