"""Where a tenant's checkpoints live and how one place is read (``control_plane/audit/
anchors.py``): object names, the places a checkpoint's ``anchor`` names, the root, the target of
each place, and every verdict on one object read back (its size, its JSON, its signature, its
tenant and position). Exact outcomes on an embedded database and a local bucket
(``checkpoint_world.py``), no server."""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.audit import anchors
from control_plane.audit.anchors import Found, Place
from control_plane.db.base import new_id
from control_plane.db.engine import begin_write
from control_plane.db.models import StorageConfig
from control_plane.signing import SigningKey
from tests.unit.checkpoint_world import World, at, make_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


def local_config(world: World, root: Path, *, tenant: uuid.UUID | None = None,
                 active: bool = False) -> uuid.UUID:
    """A tenant's own (local) bucket whose row names ``root`` as its bucket, as the API
    saves one."""
    with world.sessions() as session:
        begin_write(session)
        made = StorageConfig(id=new_id(), tenant_id=tenant or world.tenant, storage_type="local",
                             bucket=str(root), prefix="p", connection_config={"root": str(root)},
                             is_active=active)
        session.add(made)
        session.commit()
        return made.id


def body(world: World, seq: int, **extra: Any) -> dict[str, Any]:
    """A checkpoint as the sealer writes it (unsigned)."""
    return {"format": anchors.FORMAT, "tenant_id": str(world.tenant), "seq": seq,
            "row_hash": "a" * 64, "prev_seq": 0, "created_at": at(0).isoformat(),
            "key_id": world.key.key_id, "anchor": world.place(None), **extra}


def root_place(world: World) -> Place:
    return Place("default", None, None, f"tenants/{world.tenant}")


# -- names and places ------------------------------------------------------------------------


def test_checkpoint_names_sort_by_seq_in_twenty_digits() -> None:
    assert anchors.checkpoint_name(7) == "00000000000000000007.json"
    assert anchors.checkpoint_name(12, moved=True) == "00000000000000000012-moved.json"
    assert anchors.checkpoint_name(10**19) == "10000000000000000000.json"
    assert (anchors.FOLDER, anchors.MOVE_OPERATION, anchors.NO_CONFIG) == (
        ("audit", "checkpoints"), "audit_anchor_moved", uuid.UUID(int=0))


def test_a_place_describes_itself_with_and_without_a_configuration() -> None:
    place = Place("s3", "b", "https://s3.example", "pre")
    config = uuid.UUID(int=5)
    assert place.describe(config) == {
        "storage_config_id": f"sc_{config.hex}", "storage_type": "s3", "bucket": "b",
        "endpoint": "https://s3.example", "prefix": "pre"}
    assert place.describe(None)["storage_config_id"] is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        place.prefix = "other"  # type: ignore[misc]


def test_the_root_is_the_operators_bucket_at_the_tenants_prefix(world: World) -> None:
    assert anchors.root_of(world.tenant) == root_place(world)


def test_described_reads_back_what_describe_wrote_and_nothing_else() -> None:
    config = uuid.UUID(int=9)
    place = Place("s3", "b", None, "pre")
    assert anchors.described(place.describe(config)) == (place, config)
    assert anchors.described(place.describe(None)) == (place, None)
    good = place.describe(config)
    for bad in ("s3", None, [good], {**good, "storage_type": 3},
                {**good, "prefix": None}, {**good, "bucket": 1}, {**good, "endpoint": 2},
                {k: v for k, v in good.items() if k != "prefix"},
                {**good, "storage_config_id": "sc_nothex"}):
        assert anchors.described(bad) is None, bad
    # an id that is no string is no id; the place stands
    assert anchors.described({**good, "storage_config_id": 5}) == (place, None)
    assert anchors.described({**good, "endpoint": "e"}) == (Place("s3", "b", "e", "pre"), config)


def test_a_place_is_labelled_without_credentials(world: World) -> None:
    config = uuid.UUID(int=3)
    assert anchors.label(root_place(world), None) == (
        f"the operator's default bucket at 'tenants/{world.tenant}'")
    assert anchors.label(Place("s3", "b", None, "p"), config) == (
        f"storage configuration sc_{config.hex}")
    assert anchors.label(Place("s3", "b", None, "p"), None) == "storage configuration (unknown)"
    assert anchors.move_detail(Place("s3", "b", None, "p"), config) == (
        f"audit checkpoints move to storage configuration sc_{config.hex}")
    found = Found(3, False, Place("s3", "b", None, "p"), config, None, "x")
    assert found.where == f"storage configuration sc_{config.hex}"
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.seq = 4  # type: ignore[misc]


def test_the_previous_place_is_the_remembered_configuration_of_this_tenant_only(
        world: World, tmp_path: Path) -> None:
    own = local_config(world, tmp_path / "own")
    other_tenant = world.new_tenant()
    theirs = local_config(world, tmp_path / "theirs", tenant=other_tenant)
    with world.sessions() as session:
        assert anchors.previous(session, world.tenant, None) == (root_place(world), None)
        assert anchors.previous(session, world.tenant, uuid.UUID(int=1)) == (
            root_place(world), None)
        assert anchors.previous(session, world.tenant, theirs) == (root_place(world), None)
        assert anchors.previous(session, world.tenant, own) == (
            Place("local", str(tmp_path / "own"), None, "p"), own)


def test_each_place_has_its_target(world: World, tmp_path: Path) -> None:
    own = local_config(world, tmp_path / "own")
    config = uuid.UUID(int=4)
    here = Place("default", None, None, "tenants/x")
    with world.sessions() as session:
        bare = anchors.target_of(session, world.plane, here, None)
        named = anchors.target_of(session, world.plane, here, config)
        assert (bare.config_id, bare.prefix, named.config_id, named.prefix) == (
            uuid.UUID(int=0), "tenants/x", config, "tenants/x")
        assert bare.path("a") == "tenants/x/a"
        with pytest.raises(LookupError, match="only through its configuration"):
            anchors.target_of(session, world.plane, Place("local", "r", None, "p"), None)
        theirs = anchors.target_of(session, world.plane, Place("local", "r", None, "p"), own)
        assert (theirs.config_id, theirs.prefix) == (own, "")


def test_the_anchored_target_follows_the_heads_remembered_configuration(
        world: World, tmp_path: Path) -> None:
    own = local_config(world, tmp_path / "own")
    with world.sessions() as session:
        root = anchors.anchored_target(session, world.plane, world.tenant)
        assert (root.config_id, root.prefix) == (uuid.UUID(int=0), f"tenants/{world.tenant}")
    world.set_head(anchor_config_id=own)
    with world.sessions() as session:
        there = anchors.anchored_target(session, world.plane, world.tenant)
        assert (there.config_id, there.prefix) == (own, "")
        assert anchors.anchored_target(session, world.plane, uuid.UUID(int=8)).config_id == (
            uuid.UUID(int=0))


# -- one place read back ---------------------------------------------------------------------


def _write(world: World, name: str, data: bytes | str) -> None:
    path = world.folder() / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def _signed(world: World, content: dict[str, Any], key: SigningKey | None = None) -> str:
    content = {k: v for k, v in content.items() if k != "signature"}
    content["signature"] = (key or world.key).sign(content)
    return json.dumps(content, sort_keys=True, separators=(",", ":"))


def _read(world: World) -> list[Found]:
    with world.sessions() as session:
        target = anchors.target_of(session, world.plane, root_place(world), None)
    return anchors._read_all(target, root_place(world), None, world.key, world.tenant)


def _verdicts(world: World) -> dict[tuple[int, bool], str | None]:
    found = _read(world)
    for item in found:
        assert (item.place, item.config_id) == (root_place(world), None)
        assert (item.body is None) == (item.problem is not None)
    verdicts = {(f.seq, f.moved): f.problem for f in found}
    assert len(verdicts) == len(found)
    return verdicts


def test_only_names_of_checkpoints_are_read(world: World) -> None:
    good = _signed(world, body(world, 3))
    for name in ("notes.txt", "7.txt", "-moved.json", "3-moved-moved.json", "x3.json"):
        _write(world, name, good)
    _write(world, "00000000000000000003.json", good)
    _write(world, "tlog/checkpoint/00000000000000000003", "a note")
    assert _verdicts(world) == {(3, False): None}
    _write(world, "abc.json", good)
    _write(world, "5", good)
    assert _verdicts(world) == {(3, False): None}
    found = _read(world)
    assert found[0].body == json.loads(good)


def test_a_checkpoint_up_to_a_mebibyte_is_read_and_a_larger_one_is_not(world: World) -> None:
    good = _signed(world, body(world, 1)).encode()
    _write(world, "1.json", good + b" " * ((1 << 20) - len(good)))
    _write(world, "2.json", _signed(world, body(world, 2)).encode() + b" " * (1 << 20))
    assert _verdicts(world) == {
        (1, False): None,
        (2, False): "checkpoint 2 in the bucket is larger than any checkpoint this server "
                    "writes"}


def test_each_malformed_object_is_named_by_its_fault(world: World) -> None:
    other = SigningKey(Ed25519PrivateKey.from_private_bytes(b"\x01" * 32))
    signed = json.loads(_signed(world, body(world, 9)))
    forged = "forged or altered"
    _write(world, "1.json", "not json")
    _write(world, "2.json", '{"seq": 2, "seq": 2}')
    _write(world, "3.json", "[3]")
    _write(world, "4.json", _signed(world, body(world, 4), other))
    _write(world, "5.json", _signed(world, body(world, 5, key_id=other.key_id), other))
    _write(world, "6.json", _signed(world, body(world, 6, format="memplane-receipt/1")))
    _write(world, "7.json", _signed(world, body(world, 7, key_id="0" * 16)))
    _write(world, "8.json", json.dumps({**body(world, 8), "signature": 8}))
    _write(world, "9.json", json.dumps({**signed, "seq": 9, "row_hash": "b" * 64}))
    _write(world, "10.json", json.dumps({**body(world, 10), "signature": "!!!!"}))
    sig = world.key.sign(body(world, 11))
    _write(world, "11.json", json.dumps({**body(world, 11), "signature": sig[:8] + "!" + sig[8:]}))
    _write(world, "12.json", json.dumps({**body(world, 12), "signature": sig[:-4]}))
    nan = {**body(world, 13), "extra": math.nan}
    _write(world, "13.json", json.dumps({**nan, "signature": sig}))
    _write(world, "14.json", _signed(world, body(world, 14, tenant_id=str(uuid.UUID(int=1)))))
    _write(world, "15.json", _signed(world, body(world, 16)))
    _write(world, "16.json", _signed(world, body(world, 16, moved_to=world.place(None))))
    _write(world, "17-moved.json", _signed(world, body(world, 17)))
    _write(world, "18-moved.json", _signed(world, body(world, 18, moved_to=world.place(None))))
    verdicts = _verdicts(world)
    position = "was signed for another tenant or another position"
    assert verdicts == {
        (1, False): "checkpoint 1 in the bucket is not a well-formed checkpoint",
        (2, False): "checkpoint 2 in the bucket is not a well-formed checkpoint",
        **{(n, False): f"checkpoint {n} in the bucket does not carry a valid signature of "
                       f"this server's checkpoint key: it was {forged}"
           for n in (3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13)},
        **{(n, False): f"checkpoint {n} in the bucket {position}" for n in (14, 15, 16)},
        (17, True): f"checkpoint 17 in the bucket {position}",
        (18, True): None}


def test_a_signature_checks_each_field_it_needs(world: World) -> None:
    key = world.key
    signed = json.loads(_signed(world, body(world, 1)))
    assert anchors._signed_by(key, signed) is True
    assert anchors._signed_by(key, {**signed, "format": "x"}) is False
    assert anchors._signed_by(key, {**signed, "key_id": "x"}) is False
    assert anchors._signed_by(key, {**signed, "signature": None}) is False
    assert anchors._signed_by(key, {**signed, "prev_seq": 1}) is False
    assert anchors._refuse_duplicates([("a", 1), ("b", 2)]) == {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="a key appears twice"):
        anchors._refuse_duplicates([("a", 1), ("a", 1)])
