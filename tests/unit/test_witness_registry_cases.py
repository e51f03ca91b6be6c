"""The tenant's list of witnesses (``control_plane/audit/witness_registry.py``): what a
witness entry may be (each refusal's exact sentence, each length at its edge), the guard's
save-time check of its URL (a resolver of the test's own answers the names), and saving and
reading the list with its audit rows. An embedded database (``checkpoint_world.py``), no
server, no network."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import select, update

from control_plane.audit import witness_registry, witnesses
from control_plane.audit.witness_registry import WitnessIn, WitnessOut, listing, register
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog, AuditWitness
from control_plane.errors import InvalidInput
from control_plane.identity import Actor
from control_plane.settings import Settings
from control_plane.tlog import note
from control_plane.tlog.witness import new_key, parse_key
from tests.unit.checkpoint_world import World
from tests.unit.witness_world import a_vkey, witness_world

KEY = a_vkey()
LOG_KEY = note.Signer("memplane", parse_key(new_key("x")).private).verifier.text()


def _long_key(length: int) -> str:
    """A valid cosignature verifier key of exactly ``length`` characters."""
    name = "n" * (length - len(a_vkey("n")) + 1)
    made = a_vkey(name)
    assert len(made) == length
    return made


def _refusal(item: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as refused:
        WitnessIn.model_validate(item)
    error = refused.value.errors()[0]
    return f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"


def _url(url: str) -> dict[str, str]:
    return {"url": url, "verifier_key": KEY}


@pytest.mark.parametrize(("item", "refusal"), [
    (_url(""), "url: String should have at least 1 character"),
    (_url("   "), "url: String should have at least 1 character"),
    (_url("h"), "url: Value error, url must be an http:// or https:// URL with a host"),
    (_url("ftp://w.example"),
     "url: Value error, url must be an http:// or https:// URL with a host"),
    (_url("https:///w"), "url: Value error, url must be an http:// or https:// URL with a host"),
    (_url("https://w.example/" + "a" * 1007), "url: String should have at most 1024 characters"),
    (_url("https://u@w.example"), "url: Value error, url must not carry a user name or password"),
    (_url("https://:p@w.example"),
     "url: Value error, url must not carry a user name or password"),
    (_url("https://w.example/?x=1"),
     "url: Value error, url must not carry a query, a fragment or spaces"),
    (_url("https://w.example/#f"),
     "url: Value error, url must not carry a query, a fragment or spaces"),
    (_url("https://w.example/a b"),
     "url: Value error, url must not carry a query, a fragment or spaces"),
    (_url("https://w.example:99999"),
     "url: Value error, url is not a valid URL; give one like 'https://witness.example.com'"),
    (_url("https://w\x00.example"),
     "url: Value error, url is not a valid URL; give one like 'https://witness.example.com'"),
    ({"url": "https://w.example", "verifier_key": ""},
     "verifier_key: String should have at least 1 character"),
    ({"url": "https://w.example", "verifier_key": "  "},
     "verifier_key: String should have at least 1 character"),
    ({"url": "https://w.example", "verifier_key": "K"},
     "verifier_key: Value error, verifier_key: a verifier key reads <name>+<key id>+<base64 "
     "key>"),
    ({"url": "https://w.example", "verifier_key": LOG_KEY},
     "verifier_key: Value error, verifier_key must be a witness's cosignature key (type 0x04), "
     "as `memplane witness key` prints it, not a log's signing key"),
    ({"url": "https://w.example", "verifier_key": "w+00000000+AAAA"},
     "verifier_key: Value error, verifier_key: the verifier key is not an Ed25519 key"),
    ({"url": "https://w.example", "verifier_key": _long_key(513)},
     "verifier_key: String should have at most 512 characters"),
    ({"name": "", **_url("https://w.example")}, "name: String should have at least 1 character"),
    ({"name": " \t", **_url("https://w.example")},
     "name: String should have at least 1 character"),
    ({"name": "n" * 201, **_url("https://w.example")},
     "name: String should have at most 200 characters"),
    ({"name": "a\x01b", **_url("https://w.example")},
     "name: String should match pattern '^[^\\x00-\\x1f\\x7f]*$'"),
    ({**_url("https://w.example"), "extra": 1}, "extra: Extra inputs are not permitted"),
])
def test_a_malformed_witness_is_refused_with_its_sentence(item: dict[str, Any],
                                                         refusal: str) -> None:
    assert _refusal(item) == refusal


def test_a_witness_at_each_edge_is_taken_in_its_plain_form() -> None:
    longest = "https://w.example/" + "a" * (1024 - 18)
    key = _long_key(512)
    upper = KEY.split("+", 2)
    taken = [WitnessIn.model_validate(item).model_dump() for item in (
        {"url": " https://w.example/ ", "verifier_key": f" {KEY}\n"},
        {"name": "a", "url": longest, "verifier_key": " " + key + " "},
        {"name": " ours ", "url": "http://127.0.0.1:8080/w", "verifier_key":
         "+".join([upper[0], upper[1].upper(), upper[2]])},
        {"name": "n" * 200, "url": "https://W.example", "verifier_key": KEY})]
    assert taken == [
        {"name": None, "url": "https://w.example", "verifier_key": KEY},
        {"name": "a", "url": longest, "verifier_key": key},
        {"name": "ours", "url": "http://127.0.0.1:8080/w", "verifier_key": KEY},
        {"name": "n" * 200, "url": "https://W.example", "verifier_key": KEY}]
    assert len(longest) == 1024
    out = WitnessOut(name="n", url="u", verifier_key="k", cosigned_size=0, last_status=None,
                     last_attempt_at=None)
    assert out.model_dump()["last_status"] is None


class Resolver:
    """``socket`` as the registry sees it: names answered from ``answers`` (an address list,
    or an OSError to raise), each lookup kept."""

    SOCK_STREAM = socket.SOCK_STREAM

    def __init__(self, answers: dict[str, list[str] | Exception]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def getaddrinfo(self, host: str, port: Any, family: int, kind: int) -> list[Any]:
        self.asked.append(host)
        if family not in (socket.AF_UNSPEC, socket.AF_INET, socket.AF_INET6):
            raise socket.gaierror(socket.EAI_FAMILY, "ai_family not supported")
        found = self.answers[host]
        if isinstance(found, Exception):
            raise found
        infos = [(socket.AF_INET6 if ":" in a else socket.AF_INET, kind, 6, "", (a, port))
                 for a in found]
        return [i for i in infos if family in (socket.AF_UNSPEC, i[0])]


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Resolver:
    made = Resolver({
        "public.example": ["10.0.0.1", "8.8.8.8"],
        "private.example": ["10.0.0.1", "169.254.169.254"],
        "scoped.example": ["fe80::1%eth0"],
        "gone.example": socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
    })
    monkeypatch.setattr(witness_registry, "socket", made)
    return made


def _check(url: str, allowed: list[str] | None = None) -> dict[str, Any] | None:
    settings = Settings(data_dir=Path("/nonexistent"), allowed_endpoints=allowed or [])
    try:
        witness_registry.refuse_endpoint(witnesses.endpoint_policy(settings), url)
    except InvalidInput as refused:
        return {"detail": refused.detail, **refused.extra}
    return None


def _not_allowed(host: str) -> dict[str, Any]:
    return {"problem": "endpoint_not_allowed", "detail":
            f"the witness at {host} is not allowed on this server: use a public address, or "
            "ask the operator to list its network in MEMPLANE_ALLOWED_ENDPOINTS (loopback, "
            "private, link-local and metadata addresses are refused); nothing was saved"}


def _unresolvable(host: str) -> dict[str, Any]:
    return {"problem": "unresolvable",
            "detail": f"the witness host {host} does not resolve; nothing was saved"}


def test_the_guard_checks_every_address_a_name_resolves_to(resolver: Resolver) -> None:
    assert _check("https://public.example/w") is None
    assert _check("https://private.example") == _not_allowed("private.example")
    assert _check("https://scoped.example") == _not_allowed("scoped.example")
    assert _check("https://gone.example") == _unresolvable("gone.example")
    assert _check("https://private.example", ["169.254.169.254/32"]) is None
    assert resolver.asked == ["public.example", "private.example", "scoped.example",
                              "gone.example", "private.example"]


def test_the_guard_takes_an_address_as_it_is_written(resolver: Resolver) -> None:
    assert _check("http://[::1]:8080") == _not_allowed("::1")
    assert _check("http://[::1]:8080", ["::1/128"]) is None
    assert _check("http://8.8.8.8") == _not_allowed("8.8.8.8")  # a literal needs a CIDR
    assert _check("http://8.8.8.8", ["8.8.8.0/24"]) is None
    assert _check("http://127.0.0.1", ["8.8.8.0/24"]) == _not_allowed("127.0.0.1")
    assert _check("ftp://public.example") == _not_allowed("public.example")
    assert resolver.asked == []


def test_a_host_that_cannot_be_looked_up_is_unresolvable(resolver: Resolver) -> None:
    assert _check("https://public.example:99999") == _unresolvable("public.example")
    resolver.answers["bad.example"] = UnicodeError("label too long")
    assert _check("https://bad.example") == _unresolvable("bad.example")
    resolver.answers["odd.example"] = ["not an address"]
    assert _check("https://odd.example") == _unresolvable("odd.example")


# -- saving and reading the list --------------------------------------------------------------


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from witness_world(tmp_path)


def _rows(world: World) -> list[tuple[str, bool, str]]:
    with world.sessions() as session:
        return [(r.operation, r.success, r.detail) for r in session.scalars(
            select(AccessLog).where(AccessLog.tenant_id == world.tenant)
            .order_by(AccessLog.id))]


def _save(world: World, items: list[dict[str, Any]]) -> witness_registry.WitnessesOut:
    with world.sessions() as session:
        return register(session, world.settings, Actor(world.tenant, "api", "k1"),
                        [WitnessIn.model_validate(item) for item in items])


def _list(world: World) -> witness_registry.WitnessesOut:
    with world.sessions() as session:
        return listing(session, Actor(world.tenant, "api", "k1"))


def _id(key: str) -> str:
    return note.parse_verifier(key).id.hex()


def test_a_list_is_saved_in_its_order_read_back_and_audited(world: World) -> None:
    first, second = a_vkey("first.example"), a_vkey("second.example")
    saved = _save(world, [{"url": "http://127.0.0.1:1/", "verifier_key": first},
                          {"name": "ours", "url": "http://127.0.0.1:2", "verifier_key": second}])
    expected = witness_registry.WitnessesOut(witnesses=[
        WitnessOut(name="first.example", url="http://127.0.0.1:1", verifier_key=first,
                   cosigned_size=0, last_status=None, last_attempt_at=None),
        WitnessOut(name="ours", url="http://127.0.0.1:2", verifier_key=second,
                   cosigned_size=0, last_status=None, last_attempt_at=None)])
    assert saved == expected
    assert _rows(world) == [("audit_witnesses_write", True, "2 witnesses: 127.0.0.1 key "
                             f"{_id(first)}; 127.0.0.1 key {_id(second)}")]
    assert _list(world) == expected
    assert _rows(world)[1:] == [("audit_witnesses_read", True, "2 witnesses")]
    other = world.new_tenant()
    with world.sessions() as session:
        assert listing(session, Actor(other, "api", "k2"), audited=False).witnesses == []
    assert _save(world, []).witnesses == []
    assert _rows(world)[2:] == [("audit_witnesses_write", True, "0 witnesses")]
    assert _list(world).witnesses == []


def test_a_witness_listed_again_keeps_what_the_server_knows_of_it(world: World) -> None:
    old, new = a_vkey("old.example"), a_vkey("new.example")
    _save(world, [{"url": "http://127.0.0.1:1", "verifier_key": old}])
    heard = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)
    with world.sessions() as session:
        begin_write(session)
        session.execute(update(AuditWitness).values(cosigned_size=7, last_status="cosigned",
                                                    last_attempt_at=heard))
        session.commit()
    saved = _save(world, [{"url": "http://127.0.0.1:3", "verifier_key": new},
                          {"name": "renamed", "url": "http://127.0.0.1:4", "verifier_key": old}])
    assert [(w.name, w.url, w.cosigned_size, w.last_status, w.last_attempt_at)
            for w in saved.witnesses] == [
        ("new.example", "http://127.0.0.1:3", 0, None, None),
        ("renamed", "http://127.0.0.1:4", 7, "cosigned", heard)]
    with world.sessions() as session:
        assert [(r.position, r.verifier_key) for r in witnesses.rows(session, world.tenant)] == [
            (0, new), (1, old)]


def test_at_most_eight_witnesses_each_key_once_each_endpoint_allowed(world: World) -> None:
    eight = [{"url": f"http://127.0.0.1:{port}", "verifier_key": a_vkey()}
             for port in range(1, 9)]
    assert len(_save(world, eight).witnesses) == 8
    before = _list(world)
    hosts = ["b.example"] * 5 + ["a.example"] * 4
    nine = [{"url": f"https://{h}", "verifier_key": a_vkey()} for h in hosts]
    twice = [{"url": "https://a.example", "verifier_key": KEY},
             {"url": "https://a.example/other", "verifier_key": KEY}]
    private = [{"url": "http://10.0.0.5:8080", "verifier_key": KEY}]
    problems = []
    for items in (nine, twice, private):
        with pytest.raises(InvalidInput) as refused:
            _save(world, items)
        problems.append(refused.value.extra["problem"])
    assert problems == ["too_many_witnesses", "duplicate_witness", "endpoint_not_allowed"]
    assert _list(world) == before  # nothing was saved
    assert [(ok, detail) for op, ok, detail in _rows(world)
            if op == "audit_witnesses_write"][1:] == [
        (False, "9 witnesses a.example b.example validation_error: at most 8 witnesses; "
                "nothing was saved"),
        (False, "2 witnesses a.example validation_error: a verifier key is listed twice; "
                "nothing was saved"),
        (False, "1 witnesses 10.0.0.5 validation_error: "
         + _not_allowed("10.0.0.5")["detail"])]
