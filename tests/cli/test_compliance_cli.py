"""The compliance officer's commands against a running server (remote mode)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from typer.testing import CliRunner

from memplane.cli import app
from tests.support.service import Tenant


def _run(tenant: Tenant, key: str, *args: str, input: str | None = None) -> tuple[int, str]:
    env = {"MEMPLANE_URL": tenant.stack.base_url, "MEMPLANE_API_KEY": key}
    result = CliRunner().invoke(app, list(args), env=env, input=input)
    return result.exit_code, result.output


def test_export_erase_verify_and_audit_from_the_command_line(tenant: Tenant,
                                                             tmp_path: Path) -> None:
    with tenant.client() as client:
        for i in range(5):
            client.memory.set(scope="user", scope_ref="carla", key=f"k{i}", value={"i": i})
    officer = tenant.key("compliance")

    code, output = _run(tenant, officer, "export", "carla", "--out", str(tmp_path / "c.zip"))
    assert code == 0, output
    assert "5 of 5 memories exported" in output
    with zipfile.ZipFile(tmp_path / "c.zip") as z:
        assert json.loads(z.read("manifest.json"))["counts"]["exported"] == 5

    # a wrong retyped id erases nothing
    code, output = _run(tenant, officer, "erase", "carla", input="carl\n")
    assert code == 1 and "nothing was erased" in output
    with tenant.client() as client:
        assert len(client.memory.list_pointers(scope="user", scope_ref="carla").items) == 5

    receipt_file = tmp_path / "receipt.json"
    code, output = _run(tenant, officer, "erase", "carla", "--receipt-out", str(receipt_file),
                        input="carla\n")
    assert code == 0, output
    assert "erasure plan" in output and "pointers 5" in output
    receipt = json.loads(receipt_file.read_text())
    assert receipt["counts"]["pointers"] == 5

    with tenant.client() as client:
        (tmp_path / "key.pem").write_text(client.receipts.public_key())
    code, output = _run(tenant, officer, "receipt", "verify", str(receipt_file),
                        "--public-key", str(tmp_path / "key.pem"))
    assert code == 0 and "valid" in output
    receipt["counts"]["objects"] = 4
    (tmp_path / "tampered.json").write_text(json.dumps(receipt))
    code, output = _run(tenant, officer, "receipt", "verify", str(tmp_path / "tampered.json"),
                        "--public-key", str(tmp_path / "key.pem"))
    assert code == 1 and "INVALID" in output

    # rerunning is safe and says there was nothing left
    code, output = _run(tenant, officer, "erase", "carla", "--yes",
                        "--receipt-out", str(tmp_path / "again.json"))
    assert code == 0 and "nothing was deleted" in output

    code, output = _run(tenant, officer, "audit", "list", "--operation", "erase", "--json")
    assert code == 0
    rows = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert rows and {row["operation"] for row in rows} == {"erase"}
    assert not any("carla" in row["detail"] for row in rows)

    code, output = _run(tenant, officer, "audit", "verify")
    assert code == 0 and json.loads(output.splitlines()[-1])["ok"] is True
