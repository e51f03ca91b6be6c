"""Encryption at rest through the services: subject keys, shredding, rotation, the sweep."""

from __future__ import annotations

import os
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import AccessLog, KekVersion, MemoryPointer, SubjectKey
from control_plane.errors import HashMismatch
from control_plane.integrity.service import verify_tenant
from control_plane.keys import subject_keys as keys
from control_plane.keys.rotation import retire_keks, rotate_kek
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.plane.kek_providers import LocalKeyRing
from control_plane.plane.keyring import KeyCache, Keyring
from tests.support.clock import wait_until
from tests.support.crypto import keyring
from tests.support.service import ServiceWorld

META = MemoryMeta()


def _set(world: ServiceWorld, address: MemoryAddress, value: Any,
         meta: MemoryMeta = META) -> MemoryPointer:
    with world.runtime.sessions() as session:
        result = memories.set_value(session, world.runtime.plane, world.actor, address, value,
                                    meta)
    assert isinstance(result, MemoryPointer)
    return result



def _subject_keys(world: ServiceWorld) -> list[SubjectKey]:
    with world.runtime.sessions() as session:
        return list(session.scalars(select(SubjectKey)
                                    .where(SubjectKey.tenant_id == world.tenant_id)
                                    .order_by(SubjectKey.created_at)))


def _key_id(world: ServiceWorld, pointer: MemoryPointer) -> uuid.UUID:
    from storage_adapters.envelope import read_header

    with world.runtime.sessions() as session:
        target = world.runtime.plane.by_id(session, pointer.storage_config_id)
    return read_header(target.adapter.get(pointer.storage_path)).key_id


def _audit_ops(world: ServiceWorld) -> list[tuple[str, bool, str]]:
    with world.runtime.sessions() as session:
        return [(r.operation, r.success, r.detail) for r in session.scalars(
            select(AccessLog).where(AccessLog.tenant_id == world.tenant_id)
            .order_by(AccessLog.id))]


@pytest.fixture
def no_key_cache(world: ServiceWorld) -> Iterator[Keyring]:
    """Every read unwraps through the KEK, so rotation is really exercised."""
    ring = keyring(world.runtime)
    cache = ring.cache
    ring.cache = KeyCache(0, 0)
    try:
        yield ring
    finally:
        ring.cache = cache


def test_objects_are_sealed_per_subject_and_per_scope(world: ServiceWorld) -> None:
    by_scope = _set(world, MemoryAddress.parse(Scope.user, "u1", "lang"), "fr")
    by_meta = _set(world, MemoryAddress.parse(Scope.agent, "bot", "note"), "likes tea",
                   MemoryMeta(user_id="u1"))
    other_user = _set(world, MemoryAddress.parse(Scope.user, "u2", "lang"), "de")
    shared = _set(world, MemoryAddress.parse(Scope.agent, "bot", "plan"), "ship it")

    rows = _subject_keys(world)
    assert [(k.scope_type, k.scope_ref) for k in rows] == [
        ("user", "u1"), ("user", "u2"), ("agent", "bot")]
    assert all(k.wrapped_key is not None and len(k.wrapped_key) == 12 + 32 + 16 for k in rows)
    ids = {(k.scope_type, k.scope_ref): k.id for k in rows}
    assert _key_id(world, by_scope) == _key_id(world, by_meta) == ids[("user", "u1")]
    assert _key_id(world, other_user) == ids[("user", "u2")]
    assert _key_id(world, shared) == ids[("agent", "bot")]
    # The pointer records the plaintext's size and hash; the object is larger (envelope).
    assert by_scope.content_size == len(b'"fr"')


def test_local_key_ring_file_is_private(world: ServiceWorld) -> None:
    _set(world, MemoryAddress.parse(Scope.user, "u1", "k"), 1)
    path = world.runtime.settings.resolved_keyring_path
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_shredding_a_subject_makes_its_objects_unreadable(world: ServiceWorld) -> None:
    mine = MemoryAddress.parse(Scope.user, "u1", "diary")
    tagged = MemoryAddress.parse(Scope.agent, "bot", "about-u1")
    theirs = MemoryAddress.parse(Scope.user, "u2", "diary")
    _set(world, mine, "dear diary")
    pointer = _set(world, tagged, "u1 likes tea", MemoryMeta(user_id="u1"))
    _set(world, theirs, "other")

    with world.runtime.sessions() as session:
        assert keys.shred_subject(session, world.tenant_id, "u1") == 1
        assert keys.shred_subject(session, world.tenant_id, "u1") == 0

    for address in (mine, tagged):
        with pytest.raises(HashMismatch) as caught:
            world.read(address)
        assert "destroyed (crypto-shredded)" in caught.value.detail
        assert caught.value.extra["actual_sha256"] is None
        assert "diary" not in caught.value.detail and "tea" not in caught.value.detail
    assert world.read(theirs) == "other"
    [row] = [k for k in _subject_keys(world) if k.scope_ref == "u1"]
    assert (row.wrapped_key, row.destroyed_at is not None) == (None, True)
    with world.runtime.sessions() as session:
        assert session.get(MemoryPointer, pointer.id).sync_status == "corrupt"
    ops = _audit_ops(world)
    assert [(op, ok) for op, ok, _ in ops if op == "key_shred"] == [
        ("key_shred", True), ("key_shred", True)]
    assert [d for op, ok, d in ops if op == "read" and not ok][0].startswith(
        "hash_mismatch: object could not be decrypted (the object's subject key was destroyed")
    # A new write for the subject gets a new key; the old objects stay unreadable.
    _set(world, MemoryAddress.parse(Scope.user, "u1", "fresh"), "new start")
    assert world.read(MemoryAddress.parse(Scope.user, "u1", "fresh")) == "new start"
    assert [k.destroyed_at is None for k in _subject_keys(world)
            if k.scope_ref == "u1"] == [False, True]


def test_hot_reads_do_not_unwrap_through_the_kek(world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u1", "k")
    _set(world, address, "v")
    ring = keyring(world.runtime)
    provider = ring.provider("local")
    calls: Counter[str] = Counter()
    original = provider.unwrap

    def counting(key_ref: str, blob: bytes, context: bytes) -> bytes:
        calls["unwrap"] += 1
        return original(key_ref, blob, context)

    provider.unwrap = counting  # type: ignore[method-assign]
    try:
        ring.cache.forget([k.id for k in _subject_keys(world)])
        for _ in range(20):
            assert world.read(address) == "v"
    finally:
        provider.unwrap = original  # type: ignore[method-assign]
    assert calls["unwrap"] == 1


def test_rotation_mid_stream_fails_no_read_or_write(world: ServiceWorld,
                                                    no_key_cache: Keyring) -> None:
    addresses = [MemoryAddress.parse(Scope.user, f"u{n}", "k") for n in range(6)]
    for n, address in enumerate(addresses):
        _set(world, address, n)
    log = MemoryAddress.parse(Scope.conversation, "c1", "log")
    stop = threading.Event()
    failures: list[BaseException] = []
    done: Counter[str] = Counter()
    counting = threading.Lock()  # ``+=`` on a Counter item is not atomic across threads

    def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            try:
                _set(world, addresses[(n + i) % len(addresses)], i)
                # a subject seen for the first time: a new key under whichever KEK is current
                _set(world, MemoryAddress.parse(Scope.user, f"new-{n}-{i}", "k"), i)
                with world.runtime.sessions() as session:
                    memories.append_value(session, world.runtime.plane, world.actor, log,
                                          f"{n}:{i}", META)
                with counting:
                    done["write"] += 3
            except BaseException as exc:  # any failure at all fails the test
                failures.append(exc)
                return

    def reader() -> None:
        while not stop.is_set():
            try:
                for address in addresses:
                    assert isinstance(world.read(address), int)
                with counting:
                    done["read"] += len(addresses)
            except BaseException as exc:
                failures.append(exc)
                return

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    reports = []

    def another_round() -> None:
        # Each rotation lands mid-stream: only after every kind of call has completed
        # another round since the last one (progress, not time, paces the test).
        with counting:
            before = dict(done)
        wait_until(lambda: bool(failures) or all(
            done[kind] > before.get(kind, 0) for kind in ("read", "write")),
            "another round of reads and writes")

    try:
        for _ in range(3):
            another_round()
            with world.runtime.sessions() as session:
                reports.append(rotate_kek(session, no_key_cache, world.actor))
        another_round()
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)

    assert failures == []
    assert done["read"] >= 4 * len(addresses) and done["write"] >= 4 * 3  # a round per phase
    assert [r.to_version for r in reports] == [2, 3, 4]
    assert all(r.rewrapped >= 6 for r in reports)
    with world.runtime.sessions() as session:
        # Keys created by a writer that read the old version just before a rotation
        # committed are finished by running the rotation again.
        final = rotate_kek(session, no_key_cache, world.actor)
        retired = retire_keks(session, no_key_cache, world.actor)
        versions = {k.id: k.version for k in session.scalars(
            select(KekVersion).where(KekVersion.tenant_id == world.tenant_id))}
    live = [k for k in _subject_keys(world) if k.wrapped_key is not None]
    assert {versions[k.kek_version_id] for k in live} == {final.to_version}
    assert retired.retired == [1, 2, 3, 4] and retired.in_use == {}
    assert retired.current == final.to_version == 5
    ring_file = LocalKeyRing(world.runtime.settings.resolved_keyring_path)
    assert sum(ref.startswith(f"local:{world.tenant_id}:")
               for ref in ring_file._read()) == 1  # only the current KEK's material is left
    for address in addresses:
        assert isinstance(world.read(address), int)
    assert len(world.read(log)) == done["write"] // 3


def test_retire_refuses_versions_still_in_use(world: ServiceWorld) -> None:
    _set(world, MemoryAddress.parse(Scope.user, "u1", "k"), 1)
    ring = keyring(world.runtime)
    with world.runtime.sessions() as session:
        rotate_kek(session, ring, world.actor)
        # Put one key back on version 1, as an interrupted rotation would leave it.
        v1 = session.scalar(select(KekVersion).where(KekVersion.tenant_id == world.tenant_id,
                                                     KekVersion.version == 1))
        row = session.scalar(select(SubjectKey).where(SubjectKey.tenant_id == world.tenant_id))
        raw = keys.unwrap(session, ring, row)
        row.kek_version_id = v1.id
        row.wrapped_key = ring.provider("local").wrap(v1.key_ref, raw,
                                                      keys.wrap_context(world.tenant_id, row.id))
        session.commit()
        report = retire_keks(session, ring, world.actor)
    assert (report.retired, report.in_use, report.current) == ([], {1: 1}, 2)
    assert world.read(MemoryAddress.parse(Scope.user, "u1", "k")) == 1


def test_integrity_sweep_reports_and_marks(world: ServiceWorld) -> None:
    good = _set(world, MemoryAddress.parse(Scope.user, "u1", "good"), "fine")
    bad = _set(world, MemoryAddress.parse(Scope.user, "u1", "bad"), "flipped")
    gone = _set(world, MemoryAddress.parse(Scope.user, "u1", "gone"), "deleted")
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    blob = target.adapter.get(bad.storage_path)
    target.adapter.delete_many([bad.storage_path, gone.storage_path])
    target.adapter.put(bad.storage_path, blob[:-1] + bytes([blob[-1] ^ 1]))
    target.adapter.put(target.path("memories/user/u1/good/stray.json"), b"stray")

    seen: list[tuple[int, int]] = []
    with world.runtime.sessions() as session:
        report = verify_tenant(session, world.runtime.plane, world.actor,
                               progress=lambda done, total: seen.append((done, total)))
    assert (report.checked, report.ok, report.missing, report.corrupt) == (3, 1, 1, 1)
    assert (report.objects, report.orphaned, report.clean) == (3, 1, False)
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert {(p.key, p.kind) for p in report.problems} == {("bad", "corrupt"), ("gone", "missing")}
    with world.runtime.sessions() as session:
        statuses = {p.key: p.sync_status for p in session.scalars(
            select(MemoryPointer).where(MemoryPointer.tenant_id == world.tenant_id))}
    assert statuses == {"good": "synced", "bad": "corrupt", "gone": "corrupt"}
    ops = [(op, ok) for op, ok, _ in _audit_ops(world) if op == "integrity_verify"]
    assert ops == [("integrity_verify", False)] * 3
    assert good.id not in {p.pointer_id for p in report.problems}
