"""KEK rotation and retirement (``keys/rotation.py``) through the services, on the real
databases and the real local key ring (AWS KMS through moto): what a rotation re-wraps and
reports, which versions a retirement ends and which it keeps, what it destroys, and the
refusals of providers and KMS keys a tenant may not use."""

from __future__ import annotations

import os
import uuid
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import new_id
from control_plane.db.models import AccessLog, KekVersion, SubjectKey
from control_plane.errors import InvalidInput, KeyServiceUnavailable
from control_plane.identity import Actor
from control_plane.keys import subject_keys as keys
from control_plane.keys.rotation import kek_status, retire_keks, rotate_kek
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.plane.kek_providers import KeyUnavailable, LocalKeyRing
from control_plane.plane.keyring import Keyring
from control_plane.runtime import Runtime
from control_plane.tenants.service import create_tenant
from tests.support.crypto import keyring
from tests.support.emulators import MotoServer
from tests.support.kms import kms_settings, new_kms_key
from tests.support.service import ServiceWorld


def _write(runtime: Runtime, actor: Actor, user: str, value: object) -> None:
    with runtime.sessions() as session:
        memories.set_value(session, runtime.plane, actor,
                           MemoryAddress.parse(Scope.user, user, "k"), value, MemoryMeta())


def _read(runtime: Runtime, actor: Actor, user: str) -> object:
    with runtime.sessions() as session:
        return memories.get_value(session, runtime.plane, actor,
                                  MemoryAddress.parse(Scope.user, user, "k")).value


def _versions(session_owner: Runtime, tenant_id: uuid.UUID) -> dict[int, KekVersion]:
    with session_owner.sessions() as session:
        return {k.version: k for k in session.scalars(
            select(KekVersion).where(KekVersion.tenant_id == tenant_id))}


def _rotation_details(runtime: Runtime, tenant_id: uuid.UUID) -> list[str]:
    with runtime.sessions() as session:
        return list(session.scalars(
            select(AccessLog.detail).where(AccessLog.tenant_id == tenant_id,
                                           AccessLog.operation == "kek_rotate")
            .order_by(AccessLog.id)))


def _move_key(world: ServiceWorld, ring: Keyring, user: str, version: int) -> None:
    """Put the user's key back under ``version``, as an interrupted rotation leaves one."""
    kek = _versions(world.runtime, world.tenant_id)[version]
    with world.runtime.sessions() as session:
        row = session.scalar(select(SubjectKey).where(SubjectKey.tenant_id == world.tenant_id,
                                                      SubjectKey.scope_ref == user))
        assert row is not None
        raw = keys.unwrap(session, ring, row)
        row.kek_version_id = kek.id
        row.wrapped_key = ring.provider("local").wrap(
            kek.key_ref, raw, keys.wrap_context(world.tenant_id, row.id))
        session.commit()


def _material(world: ServiceWorld) -> int:
    """How many of the tenant's KEKs the local key ring file still holds."""
    ring_file = LocalKeyRing(world.runtime.settings.resolved_keyring_path)
    return sum(ref.startswith(f"local:{world.tenant_id}:") for ref in ring_file._read())


def _bulk_keys(world: ServiceWorld, session: Session,
               version: KekVersion) -> dict[uuid.UUID, bytes]:
    """500 subject keys of users ``bulk-<n>`` wrapped under ``version`` (not committed): their
    raw bytes by key id."""
    provider = keyring(world.runtime).provider("local")
    raw: dict[uuid.UUID, bytes] = {}
    for n in range(500):
        key_id, key = new_id(), os.urandom(32)
        raw[key_id] = key
        session.add(SubjectKey(id=key_id, tenant_id=world.tenant_id, scope_type="user",
                               scope_ref=f"bulk-{n}", kek_version_id=version.id,
                               wrapped_key=provider.wrap(
                                   version.key_ref, key,
                                   keys.wrap_context(world.tenant_id, key_id))))
    return raw


def test_a_rotation_rewraps_every_live_key_in_batches_of_500_without_changing_them(
        world: ServiceWorld) -> None:
    ring = keyring(world.runtime)
    _write(world.runtime, world.actor, "u0", "first")
    v1 = _versions(world.runtime, world.tenant_id)[1]
    with world.runtime.sessions() as session:
        raw = _bulk_keys(world, session, v1)  # 501 live keys with the written one
        session.add(SubjectKey(id=new_id(), tenant_id=world.tenant_id, scope_type="user",
                               scope_ref="shredded", kek_version_id=v1.id, wrapped_key=None))
        session.commit()
        report = rotate_kek(session, ring, world.actor)
    assert (report.tenant_id, report.from_versions, report.to_version, report.provider,
            report.rewrapped) == (world.tenant_id, [1], 2, "local", 501)
    with pytest.raises(FrozenInstanceError):
        report.rewrapped = 0  # type: ignore[misc]
    assert _rotation_details(world.runtime, world.tenant_id) == [
        "KEK version 2 (local) is now current",
        "re-wrapped 500 subject key(s) under KEK version 2",
        "re-wrapped 1 subject key(s) under KEK version 2"]
    v2 = _versions(world.runtime, world.tenant_id)[2]
    ring.cache.forget(list(raw))
    with world.runtime.sessions() as session:
        rows = list(session.scalars(select(SubjectKey)
                                    .where(SubjectKey.tenant_id == world.tenant_id)))
        assert sorted((r.kek_version_id == v2.id, r.wrapped_key is None) for r in rows) == (
            [(False, True)] + [(True, False)] * 501)
        for row in rows:
            if row.id in raw:  # the same key, wrapped anew
                assert keys.unwrap(session, ring, row) == raw[row.id]
    assert _read(world.runtime, world.actor, "u0") == "first"


def test_retirement_ends_the_unused_versions_keeps_those_in_use_and_destroys_their_material(
        world: ServiceWorld) -> None:
    ring = keyring(world.runtime)
    for user in ("u1", "u2"):
        _write(world.runtime, world.actor, user, user)
    with world.runtime.sessions() as session:
        assert rotate_kek(session, ring, world.actor).from_versions == [1]
        assert rotate_kek(session, ring, world.actor).from_versions == [1, 2]
    _move_key(world, ring, "u1", 1)
    assert _material(world) == 3
    with world.runtime.sessions() as session:
        first = retire_keks(session, ring, world.actor)
        again = retire_keks(session, ring, world.actor)
    assert (first.tenant_id, first.retired, first.in_use, first.current) == (
        world.tenant_id, [2], {1: 1}, 3)
    with pytest.raises(FrozenInstanceError):
        first.current = None  # type: ignore[misc]
    assert (again.retired, again.in_use, again.current) == ([], {1: 1}, 3)
    assert _material(world) == 2  # version 2's key is gone from the ring, 1's is kept
    with world.runtime.sessions() as session:
        rotated = rotate_kek(session, ring, world.actor)
        assert (rotated.from_versions, rotated.to_version, rotated.rewrapped) == ([1, 3], 4, 2)
        last = retire_keks(session, ring, world.actor)
        status = kek_status(session, world.tenant_id)
    assert (last.retired, last.in_use, last.current) == ([1, 3], {}, 4)
    assert _material(world) == 1
    assert [(s.version, s.provider, s.current, s.retired, s.subject_keys) for s in status] == [
        (1, "local", False, True, 0), (2, "local", False, True, 0),
        (3, "local", False, True, 0), (4, "local", True, False, 2)]
    with pytest.raises(FrozenInstanceError):
        status[0].current = True  # type: ignore[misc]
    cache, ring.cache = ring.cache, type(ring.cache)(0, 0)  # every read unwraps anew
    try:
        assert [_read(world.runtime, world.actor, u) for u in ("u1", "u2")] == ["u1", "u2"]
    finally:
        ring.cache = cache


def test_retiring_after_a_retirement_skips_the_retired_versions_and_ends_the_next(
        world: ServiceWorld) -> None:
    ring = keyring(world.runtime)
    _write(world.runtime, world.actor, "u1", 1)
    with world.runtime.sessions() as session:
        rotate_kek(session, ring, world.actor)
        assert retire_keks(session, ring, world.actor).retired == [1]
        rotate_kek(session, ring, world.actor)
        report = retire_keks(session, ring, world.actor)
    assert (report.retired, report.in_use, report.current) == ([2], {}, 3)


def test_a_tenant_without_a_kek_retires_nothing(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        report = retire_keks(session, keyring(world.runtime), world.actor)
        assert kek_status(session, world.tenant_id) == []
    assert (report.retired, report.in_use, report.current) == ([], {}, None)


def test_a_rotation_refuses_a_provider_or_key_ref_this_server_cannot_use(
        world: ServiceWorld) -> None:
    ring = keyring(world.runtime)
    _write(world.runtime, world.actor, "u1", 1)
    with world.runtime.sessions() as session:
        with pytest.raises(InvalidInput) as caught:
            rotate_kek(session, ring, world.actor, provider="aws-kms")
        assert caught.value.detail == (
            "the KEK provider 'aws-kms' is not configured on this server; leave provider out "
            "to use the configured one")
        for provider in (None, "local"):
            with pytest.raises(InvalidInput) as caught:
                rotate_kek(session, ring, world.actor, key_ref="arn:aws:kms:x", provider=provider)
            assert caught.value.detail == ("key_ref names a KMS key; the local key ring makes "
                                           "its own keys, so leave key_ref out")
        # A server whose own provider is not configured: the operator's fault, not the input.
        broken = Keyring(world.runtime.settings)
        broken.default_provider = "aws-kms"
        with pytest.raises(KeyServiceUnavailable) as unavailable:
            rotate_kek(session, broken, world.actor)
        assert unavailable.value.detail.startswith("the KEK provider 'aws-kms' is not "
                                                   "configured on this server; set ")
    assert sorted(_versions(world.runtime, world.tenant_id)) == [1]
    assert _rotation_details(world.runtime, world.tenant_id) == []


@pytest.mark.databases("sqlite")
def test_kms_keys_a_tenant_may_not_use_or_that_cannot_wrap_are_refused(
        database: str, moto_server: MotoServer, tmp_path: Path) -> None:
    first = new_kms_key(moto_server, "memplane test KEK")
    other = new_kms_key(moto_server, "a key tenants may not use")
    missing = first.rsplit("/", 1)[0] + "/" + str(uuid.uuid4())
    runtime = Runtime(kms_settings(database, tmp_path, moto_server, first, [first, missing]))
    runtime.migrate()
    try:
        with runtime.sessions() as session:
            tenant, _ = create_tenant(session, "kms tenant")
        actor = Actor(tenant.id, "api", "test")
        ring = runtime.plane.keys
        assert ring is not None
        _write(runtime, actor, "u1", "via kms")
        with runtime.sessions() as session:
            with pytest.raises(InvalidInput) as caught:
                rotate_kek(session, ring, actor, key_ref=other)
            assert caught.value.detail == (
                "this server does not let tenants use that KMS key; leave key_ref out to use "
                "the server's key, or ask the operator to add it to "
                "MEMPLANE_KEK_AWS_ALLOWED_KEY_REFS")
            assert sorted(_versions(runtime, tenant.id)) == [1]
            with pytest.raises(KeyServiceUnavailable) as unavailable:
                rotate_kek(session, ring, actor, key_ref=missing)
            assert unavailable.value.detail == (
                "the new KEK cannot wrap keys (KMS could not wrap a subject key: "
                "NotFoundException); the tenant stays on its current KEK version")
            # nothing was saved: version 1 stays current, and new subjects' writes work
            assert sorted(_versions(runtime, tenant.id)) == [1]
            _write(runtime, actor, "u2", "after the refused rotation")
            # Run again with a key that works, the rotation finishes.
            report = rotate_kek(session, ring, actor, key_ref=first)
        assert (report.from_versions, report.to_version, report.provider,
                report.rewrapped) == ([1], 2, "aws-kms", 2)
        assert [(v, k.key_ref) for v, k in sorted(_versions(runtime, tenant.id).items())] == [
            (1, first), (2, first)]
        ring.cache.forget(list(ring.cache._items))
        assert _read(runtime, actor, "u1") == "via kms"
    finally:
        runtime.close()


class _WrapFailsFrom(LocalKeyRing):
    """The local key ring whose wrap number ``fail_from`` (counting from 1) and every later one
    fail, as a KMS key disabled, or its grant revoked, in the middle of a rotation does."""

    def __init__(self, path: Path, fail_from: int) -> None:
        super().__init__(path)
        self.fail_from, self.wraps = fail_from, 0

    def wrap(self, key_ref: str, key: bytes, context: bytes) -> bytes:
        self.wraps += 1
        if self.wraps >= self.fail_from:
            raise KeyUnavailable("KMS could not wrap a subject key: DisabledException")
        return super().wrap(key_ref, key, context)


def test_a_kek_that_fails_in_the_middle_of_the_rewrap_stops_the_rotation_and_a_rerun_ends_it(
        world: ServiceWorld) -> None:
    ring = keyring(world.runtime)
    _write(world.runtime, world.actor, "u0", "first")
    v1 = _versions(world.runtime, world.tenant_id)[1]
    with world.runtime.sessions() as session:
        raw = _bulk_keys(world, session, v1)  # 501 live keys with the written one: two batches
        session.commit()
    # The probe wrap and the first batch of 500 succeed; the second batch's one key fails.
    failing = Keyring(world.runtime.settings)
    failing._providers["local"] = provider = _WrapFailsFrom(
        world.runtime.settings.resolved_keyring_path, fail_from=1 + 500 + 1)
    with world.runtime.sessions() as session:
        with pytest.raises(KeyServiceUnavailable) as unavailable:
            rotate_kek(session, failing, world.actor)
    assert unavailable.value.detail == (
        "the new KEK cannot wrap keys (KMS could not wrap a subject key: DisabledException)")
    assert provider.wraps == 502
    assert _rotation_details(world.runtime, world.tenant_id) == [
        "KEK version 2 (local) is now current",
        "re-wrapped 500 subject key(s) under KEK version 2"]
    versions = _versions(world.runtime, world.tenant_id)
    assert sorted(versions) == [1, 2]

    def under() -> list[uuid.UUID]:
        """Each live key's KEK version id; every bulk key unwraps (no cache) to its bytes."""
        fresh = Keyring(world.runtime.settings)
        with world.runtime.sessions() as session:
            rows = list(session.scalars(select(SubjectKey)
                                        .where(SubjectKey.tenant_id == world.tenant_id)))
            for row in rows:
                if row.id in raw:
                    assert keys.unwrap(session, fresh, row) == raw[row.id]
            return [row.kek_version_id for row in rows]

    stopped = under()
    assert (stopped.count(versions[2].id), stopped.count(v1.id), len(stopped)) == (500, 1, 501)
    ring.cache.forget(list(ring.cache._items))
    assert _read(world.runtime, world.actor, "u0") == "first"
    # Run again with a KEK that wraps, the rotation finishes: every key moves to version 3.
    with world.runtime.sessions() as session:
        report = rotate_kek(session, ring, world.actor)
    assert (report.from_versions, report.to_version, report.rewrapped) == ([1, 2], 3, 501)
    assert under() == [_versions(world.runtime, world.tenant_id)[3].id] * 501
    ring.cache.forget([*raw, *ring.cache._items])
    assert _read(world.runtime, world.actor, "u0") == "first"
