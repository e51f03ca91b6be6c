"""A live server's audit log checked by an independent implementation of RFC 9162 proofs and
C2SP signed notes (tlog-scales, from PyPI), over HTTP only: the signed checkpoint, the leaf of
each listed row, its inclusion proof and the consistency proof between two checkpoints."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.exceptions import InvalidSignature
from tlog_scales import signing, tlog

from tests.support.service import Tenant


def _get(tenant: Tenant, path: str, **params: object) -> object:
    with tenant.stack.http(tenant.admin_key) as http:
        answer = http.get(path, params=params)
    assert answer.status_code == 200, answer.text
    return answer.text if answer.headers["content-type"].startswith("text/plain") \
        else answer.json()


def _checkpoint(tenant: Tenant, vkey: signing.Vkey) -> tlog.Checkpoint:
    text = _get(tenant, "/v1/audit/checkpoint")
    assert isinstance(text, str)
    checkpoint = tlog.Checkpoint.from_text(text)
    checkpoint.verify(vkey)  # raises InvalidSignature if the log did not sign it
    assert checkpoint.origin == f"memplane/audit/{tenant.id}"
    return checkpoint


def test_an_independent_verifier_accepts_the_live_logs_checkpoints_and_proofs(
        tenant: Tenant) -> None:
    vkey_text = _get(tenant, "/v1/audit/verifier-key")
    assert isinstance(vkey_text, str)
    vkey = signing.Vkey.from_string(vkey_text)
    first = _checkpoint(tenant, vkey)
    for _ in range(5):
        _get(tenant, "/v1/audit", limit=1)  # each read is an audit row of its own
    second = _checkpoint(tenant, vkey)
    assert second.size > first.size > 0

    page = _get(tenant, "/v1/audit", limit=200)
    assert isinstance(page, dict)
    proven = 0
    for item in page["items"]:
        seq = item["seq"]
        if seq is None or seq > second.size:
            continue
        leaf = base64.b64decode(item["leaf"], validate=True)
        leaf_hash = hashlib.sha256(b"\x00" + leaf).digest()
        proof = _get(tenant, "/v1/audit/proof/inclusion", seq=seq, tree_size=second.size)
        assert isinstance(proof, dict)
        assert (proof["leaf_index"], proof["tree_size"]) == (seq - 1, second.size)
        hashes = [base64.b64decode(h, validate=True) for h in proof["hashes"]]
        tlog.InclusionProof(seq - 1, second.size, hashes).check(leaf_hash, second.root_hash)
        with pytest.raises(tlog.InclusionProofInvalid):
            other = hashlib.sha256(b"\x00" + leaf + b" ").digest()
            tlog.InclusionProof(seq - 1, second.size, hashes).check(other, second.root_hash)
        proven += 1
    assert proven >= 5

    consistency = _get(tenant, "/v1/audit/proof/consistency", first=first.size,
                       second=second.size)
    assert isinstance(consistency, dict)
    hashes = [base64.b64decode(h, validate=True) for h in consistency["hashes"]]
    tlog.ConsistencyProof(first.size, second.size, hashes).check(first.root_hash,
                                                                  second.root_hash)
    with pytest.raises(tlog.ConsistencyProofInvalid):
        tlog.ConsistencyProof(first.size, second.size, hashes).check(second.root_hash,
                                                                      second.root_hash)
    latest = _get(tenant, "/v1/audit/checkpoint")
    assert isinstance(latest, str)
    size = tlog.Checkpoint.from_text(latest).size
    forged = tlog.Checkpoint.from_text(latest.replace(f"\n{size}\n", "\n1\n", 1))
    assert forged.size == 1
    with pytest.raises(InvalidSignature):
        forged.verify(vkey)
