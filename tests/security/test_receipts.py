"""Erasure receipts (issue 10, points 5 and 7): they carry the audit chain's head, their
offline verifier refuses JSON that names a key twice, and their signing key is never
derived from a short server key."""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import select
from typer.testing import CliRunner

from control_plane.db.models import AccessLog
from control_plane.settings import Settings
from control_plane.signing import SigningKey, SigningKeyMissing, signing_key
from memplane._receipts import parse_receipt, verify_receipt
from memplane.cli import app
from tests.support.service import BOOTSTRAP_KEY, ServerThread, Tenant, make_settings

# -- the chain head --------------------------------------------------------------------------


def test_an_erasure_receipt_carries_the_audit_chain_head(tenant: Tenant) -> None:
    with tenant.client() as client:
        for i in range(3):
            client.memory.set(scope="user", scope_ref="ana", key=f"k{i}", value=i)
    with tenant.stack.client(tenant.key("compliance")) as officer:
        done = officer.jobs.wait(officer.memory.erase_user("ana").id, timeout=120)
        assert done.state == "completed", done.error
        receipt = officer.receipts.get(done.result["receipt_id"]).as_dict()
        public_key = officer.receipts.public_key()
    chain = receipt["audit"]
    assert set(chain) == {"first_seq", "last_seq", "head_seq", "head_hash"}
    assert chain["first_seq"] < chain["last_seq"] <= chain["head_seq"]
    with tenant.stack.runtime.sessions() as session:
        stored = session.scalar(select(AccessLog.row_hash).where(
            AccessLog.tenant_id == tenant.id, AccessLog.seq == chain["head_seq"]))
    assert chain["head_hash"] == stored and len(stored) == 64
    assert verify_receipt(receipt, public_key) is True  # the head is inside the signature


# -- duplicate keys --------------------------------------------------------------------------


def _signed_receipt() -> tuple[dict[str, object], str]:
    key = SigningKey(Ed25519PrivateKey.generate())
    body: dict[str, object] = {
        "format": "memplane-erasure-receipt/1", "id": str(uuid.uuid4()),
        "counts": {"pointers": 3, "objects": 3}, "work_done": True, "key_id": key.key_id}
    body["signature"] = key.sign(body)
    return body, key.public_pem()


def _verify_file(tmp_path: Path, text: str, pem: str) -> tuple[int, str]:
    (tmp_path / "receipt.json").write_text(text)
    (tmp_path / "key.pem").write_text(pem)
    result = CliRunner().invoke(app, ["receipt", "verify", str(tmp_path / "receipt.json"),
                                      "--public-key", str(tmp_path / "key.pem")])
    return result.exit_code, result.output


@pytest.mark.parametrize("where", ["top", "nested"])
def test_receipt_verification_refuses_duplicate_json_keys(tmp_path: Path, where: str) -> None:
    body, pem = _signed_receipt()
    genuine = json.dumps(body)
    assert _verify_file(tmp_path, genuine, pem)[0] == 0

    # A second value in front of the signed one: readers that keep the last value find the
    # signature valid, readers that keep the first show the forged count.
    if where == "top":
        doubled = '{"counts": {"pointers": 0, "objects": 0}, ' + genuine[1:]
        name = "counts"
    else:
        doubled = genuine.replace('"counts": {', '"counts": {"pointers": 0, ', 1)
        name = "pointers"
    assert json.loads(doubled) == body  # what the verifier saw before: the signed receipt
    code, output = _verify_file(tmp_path, doubled, pem)
    assert code == 1
    assert " ".join(output.split()) == (
        f"cannot verify: the JSON names the key '{name}' twice in one object; a signed "
        "document never does, so this one was altered")
    with pytest.raises(ValueError, match=f"names the key '{name}' twice"):
        parse_receipt(doubled)


# -- the signing key -------------------------------------------------------------------------

SHORT = ("MEMPLANE_SERVER_KEY is too short to derive the receipt signing key from (it needs 32 "
         "random bytes: 64 hex digits or 43 base64 characters); set "
         "MEMPLANE_RECEIPT_SIGNING_KEY to a dedicated Ed25519 key (base64 of 32 bytes, or PEM), "
         "the same on every replica, or use a longer random server key")


def _shared(tmp_path: Path, server_key: str, receipt_key: str | None = None) -> Settings:
    return Settings(data_dir=tmp_path, database_url="postgresql+psycopg://u@127.0.0.1:9/db",
                    server_key=server_key, receipt_signing_key=receipt_key)


@pytest.mark.parametrize("server_key", [
    secrets.token_hex(24),                    # 24 random bytes: the old test default
    secrets.token_urlsafe(24),
    # Patterned and readable server keys are refused by the settings before this
    # (tests/security/test_server_key.py).
], ids=["random-24-hex", "random-24-urlsafe"])
def test_the_receipt_key_is_never_derived_from_a_short_server_key(tmp_path: Path,
                                                                  server_key: str) -> None:
    with pytest.raises(SigningKeyMissing) as refused:
        signing_key(_shared(tmp_path, server_key))
    assert refused.value.status_code == 503
    assert refused.value.detail == SHORT
    # A dedicated key is the way out, whatever the server key.
    dedicated = base64.b64encode(secrets.token_bytes(32)).decode()
    assert signing_key(_shared(tmp_path, server_key, dedicated)).key_id == SigningKey(
        Ed25519PrivateKey.from_private_bytes(base64.b64decode(dedicated))).key_id


@pytest.mark.parametrize("server_key", [
    secrets.token_hex(32), secrets.token_urlsafe(32),
    base64.b64encode(secrets.token_bytes(32)).decode(),
], ids=["hex", "urlsafe", "base64"])
def test_a_server_key_with_32_random_bytes_still_derives_the_same_key(
        tmp_path: Path, server_key: str) -> None:
    first = signing_key(_shared(tmp_path / "a", server_key))
    second = signing_key(_shared(tmp_path / "b", server_key))  # another replica
    other = signing_key(_shared(tmp_path / "a", secrets.token_hex(32)))
    assert first.public_raw == second.public_raw
    assert other.public_raw != first.public_raw
    raw = first.private.private_bytes(serialization.Encoding.Raw,
                                      serialization.PrivateFormat.Raw,
                                      serialization.NoEncryption())
    assert server_key.encode() not in raw


@pytest.mark.databases("postgres")
def test_a_shared_server_with_a_short_server_key_refuses_to_sign(database: str,
                                                                  tmp_path: Path) -> None:
    settings = make_settings(database, tmp_path, server_key=secrets.token_hex(24),
                             receipt_signing_key=None, run_background=False)
    server = ServerThread(settings).start()
    try:
        answer = httpx.get(f"http://127.0.0.1:{server.port}/v1/receipts/public-key",
                           headers={"Authorization": f"Bearer {BOOTSTRAP_KEY}"})
    finally:
        server.stop()
    assert answer.status_code == 503
    assert answer.json() == {"error": "receipt_signing_key_missing", "detail": SHORT}
