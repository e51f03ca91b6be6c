"""The audit log as a transparency log, over HTTP on a live server: each item's leaf is proven
in the signed checkpoint by its inclusion proof, two checkpoints are proven consistent, and
everything is checked with ``control_plane.tlog`` alone (the verifier key from the server,
no database)."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import httpx
import pytest

from control_plane.tlog import merkle, note
from tests.support.service import Tenant

ROUTES = ["/v1/audit/checkpoint", "/v1/audit/verifier-key",
          "/v1/audit/proof/inclusion?seq=1&tree_size=1",
          "/v1/audit/proof/consistency?first=1&second=1"]


def _checkpoint(http: httpx.Client, verifier: note.Verifier) -> note.Checkpoint:
    answer = http.get("/v1/audit/checkpoint")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    return note.parse_checkpoint(note.verify(answer.text, verifier))


def _verifier(http: httpx.Client) -> note.Verifier:
    answer = http.get("/v1/audit/verifier-key")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    return note.parse_verifier(answer.text)


def _hashes(answer: httpx.Response) -> list[bytes]:
    assert answer.status_code == 200, answer.text
    return [base64.b64decode(h, validate=True) for h in answer.json()["hashes"]]


def _items(http: httpx.Client) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = http.get("/v1/audit", params={"limit": 1000}).json()["items"]
    return items


def _write(tenant: Tenant, n: int, ref: str = "u1") -> None:
    with tenant.client() as client:
        for i in range(n):
            client.memory.set(scope="user", scope_ref=ref, key=f"k{i}", value=i)
            client.memory.get(scope="user", scope_ref=ref, key=f"k{i}")


def _proves(http: httpx.Client, item: dict[str, Any], head: note.Checkpoint) -> bool:
    leaf = base64.b64decode(item["leaf"], validate=True)
    proof = _hashes(http.get("/v1/audit/proof/inclusion",
                             params={"seq": item["seq"], "tree_size": head.size}))
    return merkle.verify_inclusion(merkle.leaf_hash(leaf), item["seq"] - 1, head.size, proof,
                                   head.root)


def test_every_items_leaf_is_proven_in_the_signed_checkpoint(tenant: Tenant) -> None:
    _write(tenant, 3)
    with tenant.stack.http(tenant.admin_key) as http:
        verifier = _verifier(http)
        items = _items(http)
        head = _checkpoint(http, verifier)
        answers = {item["seq"]: http.get("/v1/audit/proof/inclusion", params={
            "seq": item["seq"], "tree_size": head.size}).json() for item in items}
        proven = [_proves(http, item, head) for item in items]

    assert verifier.name == "memplane"
    assert head.origin == f"memplane/audit/{tenant.id}"
    assert head.size >= max(item["seq"] for item in items)
    assert proven == [True] * len(items)
    assert [(a["leaf_index"], a["tree_size"]) for a in answers.values()] == [
        (seq - 1, head.size) for seq in answers]
    # The leaf is the item: the same fields with the same values (the detail as stored, so
    # a sealed address is its token there and opened in the item), plus the tenant.
    for item in items:
        leaf = json.loads(base64.b64decode(item["leaf"]))
        shown = {k: v for k, v in item.items() if k != "leaf"}
        assert leaf.pop("tenant_id") == str(tenant.id)
        if leaf["detail"] != shown["detail"]:
            assert "sealed:" in leaf["detail"] and "sealed:" not in shown["detail"]
            leaf["detail"] = shown["detail"]
        assert leaf == shown
        raw = base64.b64decode(item["leaf"])
        assert raw == json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":"),
                                 ensure_ascii=False).encode()
    writes = [i for i in items if i["operation"] == "write"]
    assert [json.loads(base64.b64decode(i["leaf"]))["detail"].count("sealed:")
            for i in writes] == [1, 1, 1]


def test_checkpoints_are_consistent_and_old_rows_stay_provable(tenant: Tenant) -> None:
    _write(tenant, 2)
    with tenant.stack.http(tenant.admin_key) as http:
        verifier = _verifier(http)
        old_items = _items(http)
        old = _checkpoint(http, verifier)
        _write(tenant, 3, ref="u2")
        new = _checkpoint(http, verifier)
        proof = _hashes(http.get("/v1/audit/proof/consistency",
                                 params={"first": old.size, "second": new.size}))
        same = http.get("/v1/audit/proof/consistency",
                        params={"first": new.size, "second": new.size}).json()
        proven_in_new = [_proves(http, item, new) for item in old_items]
        proven_in_old = [_proves(http, item, old) for item in old_items]

    assert new.size > old.size
    assert merkle.verify_consistency(old.size, new.size, old.root, new.root, proof)
    assert not merkle.verify_consistency(old.size, new.size, old.root, new.root,
                                         [*proof[:-1], bytes(32)])
    assert same == {"first": new.size, "second": new.size, "hashes": []}
    assert proven_in_new == proven_in_old == [True] * len(old_items)


def test_impossible_sizes_are_refused_with_a_sentence(quiet_tenant: Tenant) -> None:
    tenant = quiet_tenant  # nothing seals between the checkpoint and the proofs
    _write(tenant, 1)
    with tenant.stack.http(tenant.admin_key) as http:
        head = _checkpoint(http, _verifier(http))
        n = head.size

        def detail(path: str, **params: int) -> tuple[int, str]:
            answer = http.get(path, params=params)
            return answer.status_code, answer.json()["detail"]

        inclusion, consistency = "/v1/audit/proof/inclusion", "/v1/audit/proof/consistency"
        assert detail(inclusion, seq=1, tree_size=n + 50) == (
            422, f"tree_size {n + 50} is beyond the log's {n} sealed rows")
        assert detail(inclusion, seq=n, tree_size=n - 1) == (
            422, f"row {n} is not in the tree of the first {n - 1} rows")
        assert detail(consistency, first=2, second=n + 50) == (
            422, f"second {n + 50} is beyond the log's {n} sealed rows")
        assert detail(consistency, first=n, second=n - 1) == (
            422, f"no consistency proof from {n} to {n - 1} rows: first must be at least 1 "
                 "and at most second")
        for params in ({"seq": 0, "tree_size": n}, {"seq": 1}, {"seq": "x", "tree_size": n}):
            answer = http.get(inclusion, params=params)
            assert answer.status_code == 422 and answer.json()["error"] == "validation_error"
        failures = http.get("/v1/audit", params={"operation": "audit_inclusion_proof"}).json()
    refused = [(i["success"], i["detail"]) for i in failures["items"] if not i["success"]]
    assert refused == [
        (False, f"seq 1 in tree size {n + 50} validation_error: tree_size {n + 50} is beyond "
                f"the log's {n} sealed rows"),
        (False, f"seq {n} in tree size {n - 1} validation_error: row {n} is not in the tree "
                f"of the first {n - 1} rows")]


def test_each_route_leaves_an_audit_row(tenant: Tenant) -> None:
    _write(tenant, 1)
    with tenant.stack.http(tenant.admin_key) as http:
        verifier = _verifier(http)
        head = _checkpoint(http, verifier)
        assert http.get("/v1/audit/proof/inclusion",
                        params={"seq": 1, "tree_size": head.size}).status_code == 200
        assert http.get("/v1/audit/proof/consistency",
                        params={"first": 1, "second": head.size}).status_code == 200
        rows = [(i["operation"], i["success"], i["detail"]) for i in _items(http)
                if i["operation"].startswith("audit_") and i["operation"] != "audit_query"]
    assert rows == [
        ("audit_verifier_key", True, verifier.id.hex()),
        ("audit_checkpoint", True, f"tree size {head.size}"),
        ("audit_inclusion_proof", True, f"seq 1 in tree size {head.size}"),
        ("audit_consistency_proof", True, f"tree size 1 to {head.size}")]


def test_keys_without_audit_rights_are_refused(tenant: Tenant) -> None:
    with tenant.client() as admin:
        agent = admin.keys.create(role="agent", name="agent").api_key
        scoped = admin.keys.create(role="agent", name="scoped", agent_id="bot",
                                   scopes=[{"scope": "user", "scope_ref": "*"}]).api_key
        officer = admin.keys.create(role="compliance", name="officer").api_key
    for key in (agent, scoped):
        with tenant.stack.http(key) as http:
            for route in ROUTES:
                answer = http.get(route)
                assert answer.status_code == 403, route
                assert answer.json() == {
                    "error": "forbidden", "detail": "a key with role 'agent' may not read the "
                    "audit log; use a key with role admin or compliance"}
                assert "text/plain" not in answer.headers["content-type"]
    with tenant.stack.http(officer) as http:
        assert [http.get(route).status_code for route in ROUTES] == [200] * 4
    with tenant.stack.http() as http:
        assert [http.get(route).status_code for route in ROUTES] == [401] * 4


def test_another_tenants_rows_are_not_provable(quiet_tenant: Tenant) -> None:
    tenant = quiet_tenant  # nothing seals between the checkpoint and the proofs
    other = tenant.stack.new_tenant()
    _write(tenant, 1)
    _write(other, 6)
    with tenant.stack.http(tenant.admin_key) as mine, \
            tenant.stack.http(other.admin_key) as theirs:
        verifier = _verifier(mine)
        head = _checkpoint(mine, verifier)
        their_head = _checkpoint(theirs, verifier)
        their_items = [i for i in _items(theirs) if i["seq"] <= head.size]
        beyond = mine.get("/v1/audit/proof/inclusion",
                          params={"seq": their_head.size, "tree_size": their_head.size})
        # The same seq in this tenant's log is this tenant's row: their leaf is not in it.
        proven = [_proves(mine, item, head) for item in their_items]

    assert their_head.size > head.size
    assert their_head.origin == f"memplane/audit/{other.id}" != head.origin
    assert beyond.status_code == 422
    assert beyond.json()["detail"] == (f"tree_size {their_head.size} is beyond the log's "
                                       f"{head.size} sealed rows")
    assert their_items and proven == [False] * len(their_items)
    assert uuid.UUID(json.loads(base64.b64decode(their_items[0]["leaf"]))["tenant_id"]) \
        == other.id


@pytest.mark.parametrize("route", ["/v1/audit/checkpoint", "/v1/audit/verifier-key"])
def test_the_notes_are_plain_text_a_standard_reader_takes(tenant: Tenant, route: str) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        text = http.get(route).text
        verifier = _verifier(http)
    if route.endswith("verifier-key"):
        assert text == verifier.text()
        assert not text.endswith("\n")
    else:
        body, signatures = text.split("\n\n")
        assert len(body.split("\n")) == 3
        dash, name, blob = signatures.rstrip("\n").split(" ")
        assert (dash, name) == ("\u2014", "memplane")
        assert base64.b64decode(blob)[:4] == verifier.id and len(base64.b64decode(blob)) == 68
        assert note.verify(text, verifier) == body + "\n"
