"""An erased (or released) data subject's id cannot be recovered from the database alone.

Erasure jobs, the subject's earlier export jobs, the destroyed key's tombstone and a lifted
legal hold name the subject by a keyed hash whose key is derived from the server key, which
the database never holds; no salt is stored beside it, and the receipt's salt is left out
of the stored receipt (derived again when it is served). The test erases ``bob`` and
``josé``, holds and releases ``zoe``, then reads every row that could name them and tries
every hash a database reader could compute from what is stored (plain SHA-256, SHA-256
with any hex string found as a salt on either side, HMAC under any hex string found): none
reproduces a stored value. With the server's secret the keyed hash matches.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import unicodedata
import uuid
from typing import Any

import pytest
from sqlalchemy import select

import memplane
from control_plane.db.models import AccessLog, ErasureReceipt, Job, LegalHold, SubjectKey
from control_plane.keys.pseudonyms import pseudonym, salted_hash
from tests.support.service import Tenant

NAMES = ("bob", "zoe", unicodedata.normalize("NFC", "josé"))
HEX = re.compile(r"[0-9a-f]{16,}")


def _rows(tenant: Tenant) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    with tenant.stack.engine.connect() as conn:
        for model in (Job, AccessLog, LegalHold, ErasureReceipt, SubjectKey):
            table = model.__table__
            rows = conn.execute(select(table).where(table.c.tenant_id == tenant.id)).mappings()
            found[table.name] = [dict(row) for row in rows]
    return found


def _computable(name: str, tokens: set[str]) -> set[str]:
    """Every hash of ``name`` a reader of the database can compute with what it holds."""
    data = name.encode("utf-8")
    out = {hashlib.sha256(data).hexdigest()}
    for token in tokens:
        if len(token) % 2:
            continue
        raw = bytes.fromhex(token)
        out.add(hashlib.sha256(raw + data).hexdigest())
        out.add(hashlib.sha256(data + raw).hexdigest())
        out.add(hmac.new(raw, data, hashlib.sha256).hexdigest())
        out.add(hmac.new(token.encode(), data, hashlib.sha256).hexdigest())
    return out


def test_erased_and_released_ids_are_not_computable_from_the_database(tenant: Tenant) -> None:
    bob, zoe, jose = NAMES
    officer_key = tenant.key("compliance")
    with tenant.client() as client, tenant.stack.client(officer_key) as officer:
        for name in (bob, jose):
            client.memory.set(scope="user", scope_ref=name, key="diet", value={"v": name})
            client.memory.set(scope="team", scope_ref="T9", key=f"note-{uuid.uuid4().hex[:6]}",
                              value={"v": 1}, user_id=name)
        exported = officer.jobs.wait(officer.memory.export(user_id=bob).id, timeout=120)
        assert exported.state == "completed", exported.error
        held = officer.legal_holds.place(reason="litigation", user_id=zoe)
        with pytest.raises(memplane.Conflict, match=f"legal hold {held.id}"):
            officer.memory.erase_user(zoe)  # the hold matches its subject
        officer.legal_holds.lift(held.id)
        erased = {}
        for name in (bob, jose):
            done = officer.jobs.wait(officer.memory.erase_user(name).id, timeout=120)
            assert done.state == "completed", done.error
            erased[name] = done
        served = officer.receipts.get(erased[bob].result["receipt_id"]).as_dict()

    rows = _rows(tenant)
    text = json.dumps(rows, default=str, ensure_ascii=False)
    tokens = set(HEX.findall(text))
    stored = {t for t in tokens if len(t) == 64}
    assert not any("salt" in (job["progress"] or {}) for job in rows["jobs"])
    for name in NAMES:
        assert not _computable(name, tokens) & stored, name
        for row in rows["jobs"]:
            assert name not in (row["subject"] or ""), row["kind"]
        assert all(row["scope_ref"] != name for row in rows["subject_keys"])
        assert all(name not in (row["detail"] or "") for row in rows["access_logs"]
                   if row["operation"] == "erase")

    # With the server's secret, the keyed hash names each of them.
    credentials = tenant.stack.runtime.plane.credentials
    keyed = {name: pseudonym(credentials, tenant.id, name) for name in NAMES}
    subjects = {(row["kind"], row["subject"]) for row in rows["jobs"]}
    assert {("export", keyed[bob]), ("erase", keyed[bob]), ("erase", keyed[jose])} <= subjects
    [lifted] = [row for row in rows["legal_holds"] if row["id"] == held.id]
    assert (lifted["user_id"], lifted["subject_hash"]) == (None, keyed[zoe])
    assert {row["scope_ref"] for row in rows["subject_keys"]
            if row["scope_type"] == "user"} >= {keyed[bob], keyed[jose]}
    # Another tenant's key would name them differently: pseudonyms never compare across.
    assert pseudonym(credentials, uuid.uuid4(), bob) != keyed[bob]

    # The receipt as served carries its salt (an auditor with the id checks it offline);
    # the stored receipt does not.
    assert served["subject"]["hash"] == salted_hash(served["subject"]["salt"], bob)
    [stored_receipt] = [r for r in rows["erasure_receipts"]
                        if str(r["id"]) == erased[bob].result["receipt_id"]]
    assert "salt" not in stored_receipt["body"]["subject"]
    assert served["subject"]["salt"] not in text
