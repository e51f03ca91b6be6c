"""A real server run through the SDK: the erasure receipt and the export manifest carry their
job's rows proven in the tenant's log, ``memplane receipt verify`` checks them with the
server's verifier key, and ``memplane audit verify --bucket`` proves the log from the
tenant's bucket (and, given the database, every row's leaf) — and fails once a row is edited
in the database."""

from __future__ import annotations

import base64
import json
import zipfile
from pathlib import Path

from typer.testing import CliRunner

from control_plane.audit import service as audit
from control_plane.audit import tlog_anchor
from control_plane.db.models import AuditHead
from memplane.cli import app
from memplane.cli.transparency import check_transparency, verifier_of
from tests.security.test_audit_anchor import _rewrite
from tests.support.clock import wait_until
from tests.support.service import Tenant


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, " ".join(result.stderr.split())


def publish(tenant: Tenant) -> int:
    """Seal what is pending and have a checkpoint of the tree in the bucket; its size. The
    server's own sealer may be writing one meanwhile (one writer at a time): then this one
    waits for it, or writes the next."""
    runtime = tenant.stack.runtime

    def size() -> int:
        with runtime.sessions() as session:
            head = session.get(AuditHead, tenant.id)
            assert head is not None
            return int(head.tlog_size)

    with runtime.sessions() as session:
        audit.seal(session, tenant.id)
        head = session.get(AuditHead, tenant.id)
        assert head is not None
        sealed = int(head.tree_size)

    def written() -> bool:
        with runtime.sessions() as session:
            tlog_anchor.publish(session, runtime.plane, runtime.settings, tenant.id)
        return size() >= sealed

    wait_until(written, f"a checkpoint of the tree's {sealed} rows")
    return size()


def test_receipts_and_manifests_are_proven_and_the_bucket_alone_verifies(
        tenant: Tenant, tmp_path: Path) -> None:
    with tenant.client() as client:
        for i in range(4):
            client.memory.set(scope="user", scope_ref="dana", key=f"k{i}", value={"i": i})
    publish(tenant)
    officer = tenant.key("compliance")
    with tenant.stack.http(officer) as http:
        vkey = http.get("/v1/audit/verifier-key").raise_for_status().text
    verifier = verifier_of(vkey)
    with tenant.stack.client(officer) as client:
        export = client.jobs.wait(client.memory.export(user_id="dana").id, timeout=120)
        client.exports.download(export.id, tmp_path / "dana.zip")
        with zipfile.ZipFile(tmp_path / "dana.zip") as archive:
            manifest = json.loads(archive.read("manifest.json"))
        erased = client.jobs.wait(client.memory.erase_user("dana").id, timeout=120)
        receipt = client.receipts.get((erased.result or {})["receipt_id"]).as_dict()
        (tmp_path / "key.pem").write_text(client.receipts.public_key())
    publish(tenant)

    # the manifest: its job's manifest row, proven in the log, signed by the log's key
    said = check_transparency(manifest, verifier)
    (proven,) = manifest["transparency"]["proofs"]
    assert said.startswith(f"rows {proven['seq']} of job {export.id} proven in checkpoint ")
    assert json.loads(base64.b64decode(proven["leaf"]))["detail"] == (
        f"job {export.id}: manifest of 4 pointers and 0 events written")

    # the receipt: its first and last rows, checked by the command with the verifier key
    first, last = receipt["audit"]["first_seq"], receipt["audit"]["last_seq"]
    assert [p["seq"] for p in receipt["transparency"]["proofs"]] == [first, last]
    (tmp_path / "receipt.json").write_text(json.dumps(receipt))
    code, _, said = cli("receipt", "verify", str(tmp_path / "receipt.json"),
                        "--public-key", str(tmp_path / "key.pem"), "--verifier-key", vkey)
    assert code == 0, said
    size = int(receipt["transparency"]["checkpoint"].split("\n")[1])
    assert said == (f"valid: receipt {receipt['id']} signed by key {receipt['key_id']} in the "
                    f"audit log: rows {first}, {last} of job {erased.id} proven in checkpoint "
                    f"{size} of memplane/audit/{tenant.id}")

    # the bucket alone, then with the database: every leaf recomputed
    settings = tenant.stack.settings
    code, out, said = cli("audit", "verify", "--bucket", str(tenant.bucket_dir),
                          "--tenant", str(tenant.id), "--verifier-key", vkey,
                          "--database-url", settings.resolved_database_url)
    assert code == 0, said
    summary = json.loads(out)
    last_size = publish(tenant)
    assert summary["ok"] is True and summary["checkpoints"] >= 2
    assert summary["rows_checked"] == summary["last_size"] <= last_size
    assert summary["checkpoints_matching_rows"] == summary["checkpoints"]

    # a row edited in the database (its chain recomputed) no longer gives the signed roots
    _rewrite(tenant.stack.runtime, tenant.id, first)
    code, out, said = cli("audit", "verify", "--bucket", str(tenant.bucket_dir),
                          "--verifier-key", vkey, "--database-url",
                          settings.resolved_database_url)
    assert code == 1
    problem = json.loads(out)["problem"]
    assert problem.startswith("the database's rows 1 to ")
    assert problem.endswith(" signed: a row after row "
                            f"{max(s for s in _sizes(tenant) if s < first)} was changed")


def _sizes(tenant: Tenant) -> list[int]:
    folder = tenant.bucket_dir / "audit" / "checkpoints" / "tlog" / "checkpoint"
    return sorted(int(p.name) for p in folder.iterdir())


def test_a_malformed_verifier_key_is_a_sentence(tmp_path: Path) -> None:
    code, _, said = cli("audit", "verify", "--bucket", str(tmp_path), "--verifier-key",
                        "memplane+zz+AAAA")
    assert code == 2
    assert "the verifier key's id or key is not hex / base64" in " ".join(
        said.replace("│", " ").split())
