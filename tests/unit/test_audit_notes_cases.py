"""The audit log's signed notes (``control_plane/audit/notes.py``): a tenant's origin, the
server's signer, a checkpoint signed by it, and proof hashes in base64. No database."""

from __future__ import annotations

import base64
import hashlib
import uuid
from pathlib import Path

from control_plane.audit import notes
from control_plane.settings import Settings
from control_plane.signing import signing_key
from control_plane.tlog import note

TENANT = uuid.UUID("7d4f0c1e-5b7a-4a44-9d0e-3c1f2b6a9e01")


def _settings(tmp_path: Path, name: str = "memplane") -> Settings:
    return Settings(data_dir=tmp_path, database_url=None, default_bucket_url=None,
                    admin_key=None, receipt_signing_key=None, audit_log_name=name)


def test_a_tenants_checkpoint_is_signed_by_the_servers_key_under_its_origin(
        tmp_path: Path) -> None:
    settings = _settings(tmp_path, "log.example")
    assert notes.origin(settings, TENANT) == f"log.example/audit/{TENANT}"
    signer = notes.signer(settings)
    assert signer.name == "log.example"
    assert signer.private.public_key().public_bytes_raw() == (
        signing_key(settings).private.public_key().public_bytes_raw())
    root = hashlib.sha256(b"root").digest()
    signed = notes.signed_checkpoint(settings, TENANT, 12, root)
    text = f"log.example/audit/{TENANT}\n12\n{base64.b64encode(root).decode()}\n"
    assert signed == note.sign(text, signer)
    assert note.verify(signed, signer.verifier) == text
    assert note.parse_checkpoint(text) == note.Checkpoint(f"log.example/audit/{TENANT}", 12,
                                                          root)
    assert [s.name for s in note.parse(signed).signatures] == ["log.example"]


def test_proof_hashes_are_written_in_standard_base64() -> None:
    hashes = [bytes(range(32)), b"\xff" * 32]
    assert notes.encoded(hashes) == [base64.b64encode(h).decode() for h in hashes]
    assert notes.encoded([b"\xfb\xff"]) == ["+/8="]
    assert notes.encoded([]) == []
