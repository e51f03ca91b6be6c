"""``memplane receipt verify`` on a receipt that carries its audit rows' inclusion proofs:
offline, the checkpoint's signature, each proof against its root, each row naming the job.

The receipts here are built from ``logs.py`` and signed with a receipt key, as the server
builds them; ``test_server_proofs.py`` takes one from a running server."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from control_plane.tlog import note
from memplane.cli import app
from tests.transparency.logs import Log, b64


def receipt(log: Log, job_id: uuid.UUID, *, signer: note.Signer | None = None,
            alter: Any = None) -> dict[str, Any]:
    """A signed erasure receipt whose job's first and last rows are proven in the log."""
    log.append(n=4)
    first = log.append("erase", f"job {job_id}: erasure started for a data subject")
    log.append("erase", f"job {job_id}: pointer and object deleted", n=3)
    log.append(n=2)
    last = log.append("erase", f"job {job_id}: erasure completed; receipt r")
    size = log.append(n=3)
    proofs = [{"seq": seq, "leaf": b64(log.leaves[seq - 1]),
               "hashes": [b64(h) for h in log.inclusion(seq, size)]} for seq in (first, last)]
    body: dict[str, Any] = {
        "format": "memplane-erasure-receipt/1", "id": str(uuid.uuid4()), "job_id": str(job_id),
        "tenant_id": str(log.tenant_id), "counts": {"pointers": 3},
        "audit": {"first_seq": first, "last_seq": last, "head_seq": size, "head_hash": "0" * 64},
        "transparency": {"checkpoint": log.note(size, signer), "proofs": proofs},
        "key_id": log.key.key_id}
    if alter is not None:
        alter(body)
    body["signature"] = log.key.sign(body)
    return body


def run(tmp_path: Path, log: Log, body: dict[str, Any], *extra: str) -> tuple[int, str]:
    (tmp_path / "receipt.json").write_text(json.dumps(body))
    (tmp_path / "key.pem").write_text(log.key.public_pem())
    result = CliRunner().invoke(app, ["receipt", "verify", str(tmp_path / "receipt.json"),
                                      "--public-key", str(tmp_path / "key.pem"), *extra])
    return result.exit_code, " ".join(result.stderr.split())


@pytest.fixture
def log() -> Log:
    return Log()


def test_a_receipts_rows_are_proven_in_the_log(tmp_path: Path, log: Log) -> None:
    job = uuid.uuid4()
    body = receipt(log, job)
    code, said = run(tmp_path, log, body, "--verifier-key", log.vkey)
    assert code == 0, said
    assert said == (f"valid: receipt {body['id']} signed by key {log.key.key_id} in the audit "
                    f"log: rows 5, 11 of job {job} proven in checkpoint 14 of "
                    f"memplane/audit/{log.tenant_id}")
    # without --verifier-key, the receipt key under the log's name
    code, said = run(tmp_path, log, body)
    assert code == 0, said


def _first_hash(body: dict[str, Any]) -> None:
    hashes = body["transparency"]["proofs"][0]["hashes"]
    raw = bytearray(base64.b64decode(hashes[0]))
    raw[0] ^= 1
    hashes[0] = b64(bytes(raw))


def test_an_altered_proof_hash_fails(tmp_path: Path, log: Log) -> None:
    code, said = run(tmp_path, log, receipt(log, uuid.uuid4(), alter=_first_hash),
                     "--verifier-key", log.vkey)
    assert code == 1
    assert said.endswith("INVALID: the inclusion proof of row 5 does not verify against the "
                         "checkpoint of 14 rows: the row or its proof was altered")
    # altered after signing, the receipt's own signature fails first
    body = receipt(Log(log.tenant_id, log.key), uuid.uuid4())
    _first_hash(body)
    code, said = run(tmp_path, log, body, "--verifier-key", log.vkey)
    assert (code, said) == (1, "INVALID: the receipt was changed or signed by another key")


def test_a_checkpoint_signed_by_another_key_fails(tmp_path: Path, log: Log) -> None:
    other = note.Signer(log.name, Ed25519PrivateKey.generate())
    body = receipt(log, uuid.uuid4(), signer=other)
    for extra in (("--verifier-key", log.vkey), ()):
        code, said = run(tmp_path, log, body, *extra)
        assert code == 1
        assert said.endswith(
            "INVALID: its checkpoint does not carry a valid signature of the log's key "
            "memplane (the note carries no signature of memplane): it was altered or signed "
            "by another key")


def test_a_row_of_another_job_fails(tmp_path: Path, log: Log) -> None:
    job = uuid.uuid4()

    def other_job(body: dict[str, Any]) -> None:
        body["job_id"] = str(uuid.uuid4())

    body = receipt(log, job, alter=other_job)
    code, said = run(tmp_path, log, body, "--verifier-key", log.vkey)
    assert code == 1
    assert said.endswith(f"INVALID: row 5, proven in the log, is not a row of job "
                         f"{body['job_id']}")


def test_a_named_row_without_proof_fails(tmp_path: Path, log: Log) -> None:
    def drop_last(body: dict[str, Any]) -> None:
        body["transparency"]["proofs"].pop()

    code, said = run(tmp_path, log, receipt(log, uuid.uuid4(), alter=drop_last),
                     "--verifier-key", log.vkey)
    assert code == 1
    assert said.endswith("INVALID: row 11, which the receipt names, has no inclusion proof")


def test_a_receipt_of_another_tenants_log_fails(tmp_path: Path, log: Log) -> None:
    def other_tenant(body: dict[str, Any]) -> None:
        body["tenant_id"] = str(uuid.uuid4())

    body = receipt(log, uuid.uuid4(), alter=other_tenant)
    code, said = run(tmp_path, log, body, "--verifier-key", log.vkey)
    assert code == 1
    assert said.endswith(f"INVALID: its checkpoint is of the log memplane/audit/"
                         f"{log.tenant_id}, not of the receipt's tenant {body['tenant_id']}")


def test_a_receipt_without_proofs_still_verifies_and_says_so(tmp_path: Path, log: Log) -> None:
    def without(body: dict[str, Any]) -> None:
        del body["transparency"]

    body = receipt(log, uuid.uuid4(), alter=without)
    code, said = run(tmp_path, log, body, "--verifier-key", log.vkey)
    assert code == 0
    assert said == (f"valid: receipt {body['id']} signed by key {log.key.key_id} it carries no "
                    "proofs against the audit log (issued before receipts did)")
