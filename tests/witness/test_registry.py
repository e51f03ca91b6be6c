"""PUT/GET /v1/audit/witnesses and the collection of cosignatures
(control_plane/audit/witnesses.py), on SQLite and PostgreSQL, against real
`memplane witness serve` processes. The log key is the server's own audit signing key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.audit import tlog_anchor, witnesses
from control_plane.audit.witness_registry import WitnessIn, register
from control_plane.errors import InvalidInput
from control_plane.identity import Actor
from control_plane.signing import signing_key
from control_plane.tlog import merkle, note
from control_plane.tlog.witness import cosigner_verifier, new_key, parse_key
from tests.support.emulators import closed_port
from tests.support.local_http import LocalHTTPServer, answer
from tests.support.service import Tenant

from .logs import Log, reader
from .process import WitnessProcess, run_cli


def log_of(tenant: Tenant) -> Log:
    key = signing_key(tenant.stack.settings).private
    return Log(note.Signer("memplane", key), [f'{{"seq":{i + 1}}}'.encode() for i in range(12)],
               f"memplane/audit/{tenant.id}")


@pytest.fixture
def log(tenant: Tenant) -> Log:
    return log_of(tenant)


def start_witness(tmp: Path, name: str, log_vkey: str) -> tuple[WitnessProcess, str]:
    key = tmp / f"{name.replace('/', '_')}.key"
    made = run_cli("witness", "key", "--out", str(key), "--name", name)
    assert made.returncode == 0, made.stderr
    return WitnessProcess(key, [log_vkey], tmp / f"state-{key.stem}").start(), made.stdout.strip()


@pytest.fixture
def served(tmp_path: Path, log: Log) -> Iterator[tuple[WitnessProcess, str]]:
    process, vkey = start_witness(tmp_path, "witness.example.com/w1", log.vkey)
    try:
        yield process, vkey
    finally:
        process.stop()


def call(tenant: Tenant, method: str, body: Any = None, key: str | None = None) -> Any:
    with tenant.stack.http(key or tenant.admin_key) as http:
        return http.request(method, "/v1/audit/witnesses", json=body)


def rows(tenant: Tenant, operation: str) -> list[tuple[bool, str]]:
    with tenant.client() as client:
        return [(r.success, r.detail) for r in client.audit.list(operation=operation).items]


def collect(tenant: Tenant, log: Log, size: int, old: int, **kwargs: Any
            ) -> witnesses.Collected:
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        return witnesses.collect(session, kwargs.pop("settings", runtime.settings), tenant.id,
                                 log.checkpoint(size), old, log.proof(old, size), **kwargs)


def a_vkey(name: str = "w.example") -> str:
    return cosigner_verifier(parse_key(new_key(name))).text()


def test_witnesses_are_registered_by_admins_read_by_compliance_and_audited(
        tenant: Tenant, stack: Any, served: tuple[WitnessProcess, str]) -> None:
    process, vkey = served
    put = call(tenant, "PUT", [{"url": process.url + "/", "verifier_key": vkey}])
    listed = {"witnesses": [{"name": "witness.example.com/w1", "url": process.url,
                             "verifier_key": vkey, "cosigned_size": 0, "last_status": None,
                             "last_attempt_at": None}]}
    assert (put.status_code, put.json()) == (200, listed)
    assert call(tenant, "GET", key=tenant.key("compliance")).json() == listed
    for role in ("agent", "compliance"):
        refused = call(tenant, "PUT", [], key=tenant.key(role))
        assert refused.status_code == 403
    assert call(tenant, "GET", key=tenant.key("agent")).status_code == 403
    other = stack.new_tenant()
    assert call(other, "GET").json() == {"witnesses": []}
    key_id = note.parse_verifier(vkey).id.hex()
    assert rows(tenant, "audit_witnesses_write") == [
        (True, f"1 witnesses: 127.0.0.1 key {key_id}")]
    assert rows(tenant, "audit_witnesses_read") == [(True, "1 witnesses")]
    assert rows(other, "audit_witnesses_read") == [(True, "0 witnesses")]
    named = call(tenant, "PUT", [{"name": "ours", "url": process.url, "verifier_key": vkey}])
    assert named.json()["witnesses"][0]["name"] == "ours"
    assert call(tenant, "PUT", []).json() == {"witnesses": []}


LOG_KEY = note.Signer("memplane", Ed25519PrivateKey.generate()).verifier.text()


@pytest.mark.parametrize(("item", "detail"), [
    ({"url": "ftp://w.example", "verifier_key": "K"},
     "body.0.url: Value error, url must be an http:// or https:// URL with a host"),
    ({"url": "https://u:p@w.example", "verifier_key": "K"},
     "body.0.url: Value error, url must not carry a user name or password"),
    ({"url": "https://w.example/?x=1", "verifier_key": "K"},
     "body.0.url: Value error, url must not carry a query, a fragment or spaces"),
    ({"url": "https://w.example:99999", "verifier_key": "K"},
     "body.0.url: Value error, url is not a valid URL; give one like "
     "'https://witness.example.com'"),
    ({"url": "https://w.example", "verifier_key": LOG_KEY},
     "body.0.verifier_key: Value error, verifier_key must be a witness's cosignature key "
     "(type 0x04), as `memplane witness key` prints it, not a log's signing key"),
    ({"url": "https://w.example", "verifier_key": "w+00000000+AAAA"},
     "body.0.verifier_key: Value error, verifier_key: the verifier key is not an Ed25519 key"),
    ({"url": "https://w.example", "verifier_key": "K", "extra": 1},
     "body.0.extra: Extra inputs are not permitted"),
])
def test_malformed_witnesses_are_refused(tenant: Tenant, item: dict[str, Any],
                                         detail: str) -> None:
    if item["verifier_key"] == "K":
        item = {**item, "verifier_key": a_vkey()}
    refused = call(tenant, "PUT", [item])
    assert refused.status_code == 422
    assert refused.json()["detail"] == detail
    assert call(tenant, "GET").json() == {"witnesses": []}


def test_too_many_or_repeated_witnesses_are_refused(tenant: Tenant) -> None:
    key = a_vkey()
    twice = call(tenant, "PUT", [{"url": "http://127.0.0.1:1", "verifier_key": key}] * 2)
    assert (twice.status_code, twice.json()["problem"], twice.json()["detail"]) == (
        422, "duplicate_witness", "a verifier key is listed twice; nothing was saved")
    many = call(tenant, "PUT", [{"url": "http://127.0.0.1:1", "verifier_key": a_vkey()}
                                for _ in range(9)])
    assert (many.status_code, many.json()["problem"]) == (422, "too_many_witnesses")
    assert [ok for ok, _ in rows(tenant, "audit_witnesses_write")] == [False, False]


@pytest.mark.parametrize("url", ["http://169.254.169.254", "http://10.0.0.5:8080",
                                 "http://[::1]:8080", "http://[fd00:ec2::254]/w",
                                 "http://[::ffff:169.254.169.254]"])
def test_private_and_metadata_addresses_are_refused_by_the_guard(tenant: Tenant,
                                                                 url: str) -> None:
    refused = call(tenant, "PUT", [{"url": url, "verifier_key": a_vkey()}])
    host = url.split("//")[1].split("/")[0].rsplit(":", 1)[0] if "[" not in url else \
        url.split("[")[1].split("]")[0]
    assert (refused.status_code, refused.json()["problem"]) == (422, "endpoint_not_allowed")
    assert refused.json()["detail"] == (
        f"the witness at {host} is not allowed on this server: use a public address, or ask "
        "the operator to list its network in MEMPLANE_ALLOWED_ENDPOINTS (loopback, private, "
        "link-local and metadata addresses are refused); nothing was saved")
    assert call(tenant, "GET").json() == {"witnesses": []}
    assert rows(tenant, "audit_witnesses_write")[0][0] is False


def test_loopback_needs_the_operators_allowance(tenant: Tenant,
                                               served: tuple[WitnessProcess, str],
                                               log: Log) -> None:
    """The test servers allow 127.0.0.1/32 (as for the embedders' stand-ins); without that
    allowance the same witness is refused when saved and at every connection."""
    process, vkey = served
    strict = tenant.stack.settings.model_copy(update={"allowed_endpoints": []})
    actor = Actor(tenant.id, "api", "test")
    with tenant.stack.runtime.sessions() as session, pytest.raises(InvalidInput) as refused:
        register(session, strict, actor, [WitnessIn(url=process.url,
                                                              verifier_key=vkey)])
    assert refused.value.extra == {"problem": "endpoint_not_allowed"}
    localhost = f"http://localhost:{process.port}"
    assert call(tenant, "PUT", [{"url": localhost, "verifier_key": vkey}]).status_code == 200
    collected = collect(tenant, log, 4, 0, settings=strict)
    assert collected.note == log.checkpoint(4)
    assert [o.status for o in collected.outcomes] == ["endpoint_not_allowed"]
    assert not (process.output.parent / "state-witness.example.com_w1").joinpath(
        "witness-state.json").exists()  # nothing reached the witness
    assert call(tenant, "GET").json()["witnesses"][0]["last_status"] == "endpoint_not_allowed"
    assert [o.status for o in collect(tenant, log, 4, 0).outcomes] == ["cosigned"]


def test_cosignatures_are_collected_from_a_real_witness_and_the_note_verifies(
        tenant: Tenant, served: tuple[WitnessProcess, str], log: Log) -> None:
    process, vkey = served
    assert call(tenant, "PUT", [{"url": process.url, "verifier_key": vkey}]).status_code == 200
    witness_key = note.parse_verifier(vkey)
    with tenant.stack.runtime.sessions() as session:
        first = witnesses.collect_cosignatures(session, tenant.stack.runtime.settings,
                                               tenant.id, log.checkpoint(5), 0, [])
    assert first.startswith(log.checkpoint(5)) and first.count("\n\u2014 ") == 2
    assert note.verify(first, note.parse_verifier(log.vkey)) == note.parse(first).text
    assert note.verify_cosignature(first, witness_key) > 0
    assert note.parse_checkpoint(note.parse(first).text).root == merkle.root_of_leaves(
        log.leaves[:5])

    extended = collect(tenant, log, 9, 5)
    assert [o.status for o in extended.outcomes] == ["cosigned"]
    assert note.verify_cosignature(extended.note, witness_key) > 0
    listed = call(tenant, "GET").json()["witnesses"][0]
    assert (listed["cosigned_size"], listed["last_status"]) == (9, "cosigned")

    fork = log.fork(5)
    forked = collect(tenant, fork, 11, 9)
    assert forked.note == fork.checkpoint(11)
    assert [o.status for o in forked.outcomes] == ["proof_refused"]

    behind = collect(tenant, log, 11, 5)  # the caller's previous checkpoint is not the
    assert [(o.status, o.size) for o in behind.outcomes] == [("conflict", 9)]  # witness's
    assert call(tenant, "GET").json()["witnesses"][0]["cosigned_size"] == 9

    def prove(first: int, second: int) -> list[bytes]:
        return merkle.consistency_proof(first, second, reader(log.leaves))

    caught_up = collect(tenant, log, 11, 5, prove=prove)
    assert [(o.status, o.size) for o in caught_up.outcomes] == [("cosigned", 11)]
    assert note.verify_cosignature(caught_up.note, witness_key) > 0
    # Listed again (renamed, moved), the witness keeps what the server knows of it.
    again = call(tenant, "PUT", [{"name": "renamed", "url": f"http://localhost:{process.port}",
                                  "verifier_key": vkey}]).json()["witnesses"][0]
    assert (again["name"], again["cosigned_size"], again["last_status"]) == (
        "renamed", 11, "cosigned")


class WrongCosigner(LocalHTTPServer):
    """Answers 200 with a cosignature of the registered key over another checkpoint."""

    def __init__(self) -> None:
        super().__init__()
        self.signer = parse_key(new_key("liar.example"))

    def handle(self, handler: Any, body: bytes) -> None:
        other = note.Checkpoint("memplane/audit/other", 1, bytes(32)).text()
        answer(handler, 200, {"Content-Type": "text/plain"},
               note.cosign(other, self.signer, 1).line().encode())


def test_witnesses_that_refuse_or_fail_are_skipped_and_recorded(
        tenant: Tenant, served: tuple[WitnessProcess, str], log: Log, tmp_path: Path) -> None:
    process, vkey = served
    # The server's sealer would send the tenant's own checkpoints to the same witnesses and
    # record their answers over these: this test holds the tenant's checkpoint writing.
    with tenant.stack.runtime.sessions() as session:
        tlog_anchor.wait_for_claim(session, tenant.id)
    stranger, stranger_vkey = start_witness(
        tmp_path, "stranger.example", note.Signer("memplane", Ed25519PrivateKey.generate())
        .verifier.text())
    try:
        with WrongCosigner() as liar:
            listed = [{"url": process.url, "verifier_key": vkey},
                      {"url": f"http://127.0.0.1:{closed_port()}", "verifier_key": a_vkey()},
                      {"url": liar.url,
                       "verifier_key": cosigner_verifier(liar.signer).text()},
                      {"url": stranger.url, "verifier_key": stranger_vkey}]
            assert call(tenant, "PUT", listed).status_code == 200
            collected = collect(tenant, log, 6, 3)  # the witnesses have cosigned nothing
    finally:
        stranger.stop()
    assert [o.status for o in collected.outcomes] == [
        "cosigned", "unreachable", "bad_cosignature", "log_key_refused"]
    only = note.parse(collected.note).signatures
    assert [s.name for s in only] == ["memplane", "witness.example.com/w1"]
    assert note.verify_cosignature(collected.note, note.parse_verifier(vkey)) > 0
    assert [w["last_status"] for w in call(tenant, "GET").json()["witnesses"]] == [
        "cosigned", "unreachable", "bad_cosignature", "log_key_refused"]


def test_the_cosigned_note_is_stored_once_in_the_tenants_bucket(
        tenant: Tenant, served: tuple[WitnessProcess, str], log: Log) -> None:
    process, vkey = served
    assert call(tenant, "PUT", [{"url": process.url, "verifier_key": vkey}]).status_code == 200
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        target = runtime.plane.active(session, tenant.id)
        session.rollback()
        collected = witnesses.cosign_and_store(session, runtime.settings, target, tenant.id,
                                               log.checkpoint(3), 0, [])
        assert witnesses.store_cosigned(target, 3, "another note\n") is False
    stored = tenant.bucket_dir / "audit" / "checkpoints" / "tlog" / "cosigned" / f"{3:020d}"
    assert stored.read_text() == collected.note
    assert note.verify_cosignature(stored.read_text(), note.parse_verifier(vkey)) > 0


def test_a_tenant_without_witnesses_gets_its_note_back(tenant: Tenant, log: Log) -> None:
    collected = collect(tenant, log, 2, 0)
    assert (collected.note, collected.outcomes) == (log.checkpoint(2), ())
