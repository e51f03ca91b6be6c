"""Subject pseudonyms and receipt salts are stored (the pseudonym in the control plane, the
salted hash in a published receipt) and recomputed later, so each derivation is pinned to a
fixed vector: a change would orphan every pseudonym already written and every receipt
already handed out."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from control_plane.keys import pseudonyms
from control_plane.plane.credentials import CredentialBox

BOX = CredentialBox("a-server-key-of-enough-length-0001")
TENANT = uuid.UUID("00000000-0000-4000-8000-000000000001")
OTHER_TENANT = uuid.UUID("00000000-0000-4000-8000-000000000002")
JOB = uuid.UUID("00000000-0000-4000-8000-0000000000aa")


def test_a_pseudonym_is_pinned_per_server_key_tenant_and_user() -> None:
    assert pseudonyms.pseudonym(BOX, TENANT, "alice") == (
        "hmac:5d061178a8634031508570f88871770448615cabc8b13d941e707197f528b2dc")
    assert pseudonyms.pseudonym(BOX, TENANT, "Zoë") == (
        "hmac:b599540d919a3d16880bbcffdc4724fedbbe448818e3956c14c51d1839ebfa45")
    assert pseudonyms.pseudonym(BOX, OTHER_TENANT, "alice") != pseudonyms.pseudonym(
        BOX, TENANT, "alice")
    other_server = CredentialBox("another-server-key-of-enough-len")
    assert pseudonyms.pseudonym(other_server, TENANT, "alice") != pseudonyms.pseudonym(
        BOX, TENANT, "alice")


def test_a_receipt_salt_is_32_hex_pinned_per_job_and_unlike_the_pseudonym_key() -> None:
    salt = pseudonyms.receipt_salt(BOX, TENANT, JOB)
    assert salt == "e259e3bc736e61a417e4c68f1b11095b"
    assert pseudonyms.receipt_salt(BOX, TENANT, uuid.uuid4()) != salt
    assert pseudonyms.receipt_salt(BOX, OTHER_TENANT, JOB) != salt


def test_the_salted_hash_is_sha256_of_the_salt_bytes_then_the_utf8_user_id() -> None:
    assert pseudonyms.salted_hash("00" * 16, "alice") == hashlib.sha256(
        bytes(16) + b"alice").hexdigest()
    assert pseudonyms.salted_hash("e259e3bc736e61a417e4c68f1b11095b", "alice") == (
        "9e033c38bde914602c3142b2f0fb5982e090687edaddc975af3121f729caec21")


def test_without_a_server_key_nothing_is_derived() -> None:
    with pytest.raises(RuntimeError, match="no server key to derive a subject pseudonym"):
        pseudonyms.pseudonym(None, TENANT, "alice")
    with pytest.raises(RuntimeError, match="no server key"):
        pseudonyms.receipt_salt(None, TENANT, JOB)
