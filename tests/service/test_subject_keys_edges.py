"""Subject keys at their edges: what a handle shows, the context an object is sealed under,
the refusals of ``open_object`` and ``SubjectKeyOpener``, an unreachable KEK, and the
creation loop when another writer or a rotation gets in between (forced at the named step)."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import select, update

from control_plane.db.models import AccessLog, SubjectKey
from control_plane.errors import Conflict, KeyServiceUnavailable
from control_plane.keys import subject_keys as keys
from control_plane.keys.rotation import retire_keks, rotate_kek
from control_plane.plane.kek_providers import KeyUnavailable
from control_plane.plane.keyring import Keyring
from storage_adapters import envelope
from storage_adapters.envelope import DecryptionError
from tests.support.crypto import keyring, tampered
from tests.support.service import ServiceWorld

U1 = ("user", "u1")


@pytest.fixture
def ring(world: ServiceWorld) -> Iterator[Keyring]:
    ring = keyring(world.runtime)
    enabled = ring.enabled
    try:
        yield ring
    finally:
        ring.enabled = enabled



def _create(world: ServiceWorld, ring: Keyring,
            subject: tuple[str, str] = U1) -> keys.SubjectKeyHandle:
    with world.runtime.sessions() as session:
        return keys.key_for_write(session, ring, world.tenant_id, subject)


def _rows(world: ServiceWorld, subject: tuple[str, str] = U1) -> list[SubjectKey]:
    with world.runtime.sessions() as session:
        return list(session.scalars(select(SubjectKey).where(
            SubjectKey.tenant_id == world.tenant_id, SubjectKey.scope_type == subject[0],
            SubjectKey.scope_ref == subject[1])))


def _wrapped(row: SubjectKey) -> bytes:
    assert row.wrapped_key is not None
    return bytes(row.wrapped_key)


def _details(world: ServiceWorld, operation: str) -> list[str]:
    with world.runtime.sessions() as session:
        return [r.detail for r in session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == operation)
            .order_by(AccessLog.id))]


def _open(world: ServiceWorld, ring: Keyring, path: str, pointer_id: uuid.UUID, blob: bytes,
          live: tuple[uuid.UUID, bytes, uuid.UUID] | None = None) -> bytes:
    with world.runtime.sessions() as session:
        return keys.open_object(session, ring, world.tenant_id, path, pointer_id, blob, live)


def test_a_new_key_names_its_subject_is_frozen_and_never_shows_its_bytes(
        world: ServiceWorld, ring: Keyring) -> None:
    handle = _create(world, ring)
    [row] = _rows(world)
    assert (handle.id, handle.subject, handle.scope_type, handle.scope_ref) == (
        row.id, U1, "user", "u1")
    assert len(handle.key) == 32
    assert repr(handle) == (f"SubjectKeyHandle(id={handle.id!r}, scope_type='user', "
                            "scope_ref='u1')")
    with pytest.raises(dataclasses.FrozenInstanceError):
        handle.key = b"\0" * 32  # type: ignore[misc]
    # The audit row names the scope type and KEK version, never the subject's id.
    assert _details(world, "kek_create") == ["KEK version created with provider local"]
    assert _details(world, "key_create") == [f"subject key {handle.id} for user (KEK v1)"]
    # Asked again, the same key; nothing new created or audited.
    again = _create(world, ring)
    assert (again.id, again.key, again.subject) == (handle.id, handle.key, U1)
    assert len(_details(world, "key_create")) == 1


def test_a_looked_up_key_names_the_subject_it_was_looked_up_for(
        world: ServiceWorld, ring: Keyring) -> None:
    made = _create(world, ring, ("agent", "bot"))
    [row] = _rows(world, ("agent", "bot"))
    ring.cache.forget([made.id])
    with world.runtime.sessions() as session:
        handle = keys.handle_of(session, ring, world.tenant_id, row.id, ("agent", "bot"),
                                _wrapped(row), row.kek_version_id)
        active = keys.active_key(session, ring, world.tenant_id, ("agent", "bot"))
        none = keys.active_key(session, ring, world.tenant_id, ("agent", "other"))
    assert (handle.id, handle.scope_type, handle.scope_ref, handle.key) == (
        made.id, "agent", "bot", made.key)
    assert active is not None and (active.id, active.subject, active.key) == (
        made.id, ("agent", "bot"), made.key)
    assert none is None


@pytest.mark.parametrize("path, version_id", [
    ("p/memories/user/u1/k/0190a1b2-c3d4.json", "0190a1b2-c3d4"),
    ("p/events/user/u1/2026/12/e-7", "e-7"),
    ("v1.json", "v1"),
], ids=["memory", "no-suffix", "top-level"])
def test_an_object_is_sealed_under_its_tenant_path_version_and_pointer(
        world: ServiceWorld, ring: Keyring, path: str, version_id: str) -> None:
    """The envelope's context is ``associated_data(tenant, path, version id, pointer)``, the
    version id being the object's name without ``.json``: anything else that opens these
    objects (a restore, another replica's version) must agree on it byte for byte."""
    handle = _create(world, ring)
    pointer_id = uuid.uuid4()
    sealed = keys.seal_object(ring, world.tenant_id, handle, path, pointer_id, b"plain")
    context = envelope.associated_data(world.tenant_id, path, version_id, pointer_id)
    assert envelope.open_sealed(sealed, subject_key=handle.key, context=context) == b"plain"
    assert _open(world, ring, path, pointer_id, sealed) == b"plain"
    with pytest.raises(DecryptionError):
        _open(world, ring, path, uuid.uuid4(), sealed)  # another pointer's context


def test_without_encryption_or_a_key_objects_are_stored_and_served_as_they_are(
        world: ServiceWorld, ring: Keyring) -> None:
    handle = _create(world, ring)
    pointer_id = uuid.uuid4()
    assert keys.seal_object(ring, world.tenant_id, None, "a/b.json", pointer_id, b"x") == b"x"
    with pytest.raises(DecryptionError) as refused:
        _open(world, ring, "a/b.json", pointer_id, b'{"plain": true}')
    assert str(refused.value) == ("the object is not encrypted, but every object written "
                                  "with encryption on is (replaced outside memplane?)")
    ring.enabled = False
    assert keys.seal_object(ring, world.tenant_id, handle, "a/b.json", pointer_id, b"x") == b"x"
    assert _open(world, ring, "a/b.json", pointer_id, b'{"plain": true}') == b'{"plain": true}'


def test_an_object_under_a_key_the_tenant_does_not_have_is_refused(
        world: ServiceWorld, ring: Keyring) -> None:
    stranger = keys.SubjectKeyHandle(uuid.uuid4(), "user", "u1", envelope.new_key())
    pointer_id = uuid.uuid4()
    sealed = keys.seal_object(ring, world.tenant_id, stranger, "a/b.json", pointer_id, b"x")
    with pytest.raises(DecryptionError) as refused:
        _open(world, ring, "a/b.json", pointer_id, sealed)
    assert str(refused.value) == "the object was encrypted under a key this tenant does not have"
    with world.runtime.sessions() as session, pytest.raises(DecryptionError):
        keys.key_to_open(session, ring, world.tenant_id, stranger.id)


def test_a_wrapped_key_edited_in_the_database_is_refused_as_not_unwrapping(
        world: ServiceWorld, ring: Keyring) -> None:
    handle = _create(world, ring)
    pointer_id = uuid.uuid4()
    sealed = keys.seal_object(ring, world.tenant_id, handle, "a/b.json", pointer_id, b"x")
    [row] = _rows(world)
    with world.runtime.sessions() as session:
        session.execute(update(SubjectKey).where(SubjectKey.id == row.id)
                        .values(wrapped_key=tampered(_wrapped(row))))
        session.commit()
    ring.cache.forget([handle.id])
    with pytest.raises(DecryptionError) as refused:
        _open(world, ring, "a/b.json", pointer_id, sealed)
    assert str(refused.value) == ("the subject key's wrapped form does not unwrap with its "
                                  "KEK (edited in the database?)")


def test_the_callers_live_key_opens_its_objects_after_a_cache_miss(
        world: ServiceWorld, ring: Keyring) -> None:
    handle = _create(world, ring)
    other = _create(world, ring, ("user", "u2"))
    pointer_id = uuid.uuid4()
    sealed = keys.seal_object(ring, world.tenant_id, handle, "a/b.json", pointer_id, b"x")
    [row] = _rows(world)
    [other_row] = _rows(world, ("user", "u2"))
    ring.cache.forget([handle.id, other.id])
    live = (row.id, _wrapped(row), row.kek_version_id)
    assert _open(world, ring, "a/b.json", pointer_id, sealed, live) == b"x"
    ring.cache.forget([handle.id])
    # A live key of another subject: the object's own key is looked up instead.
    elsewhere = (other_row.id, _wrapped(other_row), other_row.kek_version_id)
    assert _open(world, ring, "a/b.json", pointer_id, sealed, elsewhere) == b"x"


def test_the_audit_logs_opener_answers_none_for_unknown_or_destroyed_keys(
        world: ServiceWorld, ring: Keyring) -> None:
    handle = _create(world, ring)
    ring.cache.forget([handle.id])
    with world.runtime.sessions() as session:
        assert keys.SubjectKeyOpener(ring).unwrapped(session, world.tenant_id,
                                                     handle.id) == handle.key
        assert keys.SubjectKeyOpener(ring).unwrapped(session, world.tenant_id,
                                                     uuid.uuid4()) is None
        assert keys.SubjectKeyOpener(ring).unwrapped(session, uuid.uuid4(), handle.id) is None
        with pytest.raises(KeyServiceUnavailable) as refused:
            keys.SubjectKeyOpener(None).unwrapped(session, world.tenant_id, handle.id)
        assert refused.value.detail == "this process has no keyring to unwrap subject keys"
    with world.runtime.sessions() as session:
        assert keys.shred_subject(session, world.tenant_id, "u1") == 1
    with world.runtime.sessions() as session:
        assert keys.SubjectKeyOpener(ring).unwrapped(session, world.tenant_id,
                                                     handle.id) is None
        assert keys.SubjectKeyOpener(None).unwrapped(session, world.tenant_id,
                                                     handle.id) is None


def test_an_unreachable_kek_is_key_service_unavailable_for_writes_and_reads(
        world: ServiceWorld, ring: Keyring, monkeypatch: pytest.MonkeyPatch) -> None:
    handle = _create(world, ring)
    pointer_id = uuid.uuid4()
    sealed = keys.seal_object(ring, world.tenant_id, handle, "a/b.json", pointer_id, b"x")
    provider = ring.provider("local")
    calls: list[object] = []

    def down(*args: object) -> bytes:
        calls.append(args)
        raise KeyUnavailable("KMS unreachable")

    monkeypatch.setattr(provider, "wrap", down)
    monkeypatch.setattr(provider, "unwrap", down)
    with pytest.raises(KeyServiceUnavailable) as refused:
        _create(world, ring, ("user", "u2"))
    assert refused.value.detail == ("the tenant's key-encryption key is unavailable "
                                    "(KMS unreachable); retry later")
    assert _rows(world, ("user", "u2")) == []
    ring.cache.forget([handle.id])
    calls.clear()
    with pytest.raises(KeyServiceUnavailable) as refused:
        _open(world, ring, "a/b.json", pointer_id, sealed)
    assert refused.value.detail == ("the tenant's key-encryption key is unavailable "
                                    "(KMS unreachable); retry later")
    assert len(calls) == 1  # nothing was re-wrapped meanwhile: the KMS is not asked twice
    monkeypatch.undo()
    assert _open(world, ring, "a/b.json", pointer_id, sealed) == b"x"


def test_a_key_rewrapped_meanwhile_under_an_unreachable_kek_is_unavailable(
        world: ServiceWorld, ring: Keyring, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader holding the row from before a rotation: the old KEK is gone, and the new one
    cannot be reached either. Unavailable (retry), not "destroyed" or "damaged"."""
    handle = _create(world, ring)
    pointer_id = uuid.uuid4()
    sealed = keys.seal_object(ring, world.tenant_id, handle, "a/b.json", pointer_id, b"x")
    [before] = _rows(world)
    with world.runtime.sessions() as session:
        rotate_kek(session, ring, world.actor)
    with world.runtime.sessions() as session:
        assert retire_keks(session, ring, world.actor).retired == [1]
    provider = ring.provider("local")
    original = provider.unwrap
    calls: list[bytes] = []

    def only_the_old_form(key_ref: str, blob: bytes, context: bytes) -> bytes:
        calls.append(blob)
        if blob == _wrapped(before):
            return original(key_ref, blob, context)  # the retired KEK is gone: raises
        raise KeyUnavailable("KMS unreachable")

    monkeypatch.setattr(provider, "unwrap", only_the_old_form)
    ring.cache.forget([handle.id])
    live = (before.id, _wrapped(before), before.kek_version_id)
    with pytest.raises(KeyServiceUnavailable):
        _open(world, ring, "a/b.json", pointer_id, sealed, live)
    [after] = _rows(world)
    assert calls == [_wrapped(before), _wrapped(after)]
    monkeypatch.undo()
    assert _open(world, ring, "a/b.json", pointer_id, sealed, live) == b"x"


def test_a_key_shredded_while_a_reader_held_it_and_the_kms_is_down_is_unavailable(
        world: ServiceWorld, ring: Keyring, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader's row is from before the shred; its KEK does not answer, and the key's row
    now has no wrapped form to fall back on: unavailable (retry, and the retry sees the
    key destroyed), never a crash on the missing form."""
    handle = _create(world, ring)
    pointer_id = uuid.uuid4()
    sealed = keys.seal_object(ring, world.tenant_id, handle, "a/b.json", pointer_id, b"x")
    [row] = _rows(world)
    live = (row.id, _wrapped(row), row.kek_version_id)
    with world.runtime.sessions() as session:
        assert keys.shred_subject(session, world.tenant_id, "u1") == 1

    def down(*args: object) -> bytes:
        raise KeyUnavailable("KMS unreachable")

    monkeypatch.setattr(ring.provider("local"), "unwrap", down)
    ring.cache.forget([handle.id])
    with pytest.raises(KeyServiceUnavailable) as refused:
        _open(world, ring, "a/b.json", pointer_id, sealed, live)
    assert refused.value.detail == ("the tenant's key-encryption key is unavailable "
                                    "(KMS unreachable); retry later")
    monkeypatch.undo()
    with pytest.raises(DecryptionError) as destroyed:
        _open(world, ring, "a/b.json", pointer_id, sealed)
    assert "destroyed (crypto-shredded)" in str(destroyed.value)


def test_a_key_another_writer_creates_meanwhile_is_the_one_returned(
        world: ServiceWorld, ring: Keyring, at_step: dict[str, Callable[[], None]]) -> None:
    theirs: list[keys.SubjectKeyHandle] = []
    at_step["key-wrapped"] = lambda: theirs.append(_create(world, ring))
    mine = _create(world, ring)
    [row] = _rows(world)
    assert (mine.id, mine.key, mine.subject) == (theirs[0].id, theirs[0].key, U1)
    assert row.id == mine.id
    assert _details(world, "key_create") == [f"subject key {mine.id} for user (KEK v1)"]


def test_a_key_whose_kek_is_retired_at_every_attempt_gives_up_after_five(
        world: ServiceWorld, ring: Keyring, at_step: dict[str, Callable[[], None]]) -> None:
    _create(world, ring, ("user", "bystander"))  # KEK v1 exists
    attempts: list[int] = []

    def rotate_and_retire() -> None:
        attempts.append(len(attempts) + 1)
        with world.runtime.sessions() as session:
            rotate_kek(session, ring, world.actor)
        with world.runtime.sessions() as session:
            retire_keks(session, ring, world.actor)
        at_step["key-wrapped"] = rotate_and_retire

    at_step["key-wrapped"] = rotate_and_retire
    with pytest.raises(Conflict) as refused:
        _create(world, ring)
    assert refused.value.detail == ("the subject's key kept changing while it was being "
                                    "created; retry")
    assert attempts == [1, 2, 3, 4, 5]
    assert _rows(world) == []


def _twins(world: ServiceWorld, ring: Keyring,
           subjects: tuple[tuple[str, str], tuple[str, str]]) -> list[keys.SubjectKeyHandle]:
    """``key_for_write`` for two subjects at once, each in a thread and session of its own;
    the caller's barrier makes them meet at the step it chose."""
    done: dict[int, keys.SubjectKeyHandle] = {}
    failed: list[BaseException] = []

    def run(n: int) -> None:
        try:
            done[n] = _create(world, ring, subjects[n])
        except BaseException as exc:  # reported below, with the other thread's outcome
            failed.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failed == []
    return [done[0], done[1]]


def _barrier_for_the_first(two: int, action: Callable[..., object]) -> Callable[..., object]:
    barrier, calls = threading.Barrier(two, timeout=20), []

    def meet(*args: object, **kwargs: object) -> object:
        calls.append(args)
        if len(calls) <= two:
            barrier.wait()
        return action(*args, **kwargs)

    return meet


def _meet(monkeypatch: pytest.MonkeyPatch, database: str, operation: str,
          before_the_write: tuple[object, str, Callable[..., object]]) -> None:
    """Where the two writers meet. On PostgreSQL inside their write transactions, at the
    audit row written just before the commit: both have checked and inserted, so the second
    commit fails on the unique index. On SQLite a write transaction holds the database, so
    they meet just before it (``before_the_write``: object, attribute, original)."""
    if database == "sqlite":
        owner, name, original = before_the_write
        monkeypatch.setattr(owner, name, _barrier_for_the_first(2, original))
        return
    record: Callable[..., object] = keys.audit.record
    meet = _barrier_for_the_first(2, record)

    def record_and_meet(session: object, actor: object, op: str, *args: object,
                        **kwargs: object) -> object:
        if op == operation:
            return meet(session, actor, op, *args, **kwargs)
        return record(session, actor, op, *args, **kwargs)

    monkeypatch.setattr(keys.audit, "record", record_and_meet)


def test_two_writers_creating_one_subjects_key_at_once_get_the_same_key(
        world: ServiceWorld, ring: Keyring, database: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both have wrapped a new key; the first to commit wins. On PostgreSQL the second's
    insert fails on the unique index of live keys, on SQLite (writers queue) it sees the
    first's row: either way it answers the winner's key."""
    _create(world, ring, ("user", "bystander"))  # the KEK exists
    _meet(monkeypatch, database, "key_create", (keys, "checkpoint", lambda step: None))
    first, second = _twins(world, ring, (U1, U1))
    [row] = _rows(world)
    assert first.id == second.id == row.id
    assert first.key == second.key
    assert _details(world, "key_create")[1:] == [f"subject key {row.id} for user (KEK v1)"]


def test_two_writers_making_a_tenants_first_kek_at_once_both_get_keys(
        world: ServiceWorld, ring: Keyring, database: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both found no KEK. On PostgreSQL both number theirs 1 and the second's commit fails
    on (tenant, version): it takes the first's KEK. On SQLite the second queues behind the
    first and numbers its own KEK 2, the current one."""
    provider = ring.provider("local")
    _meet(monkeypatch, database, "kek_create", (provider, "create", provider.create))
    made = _twins(world, ring, (U1, ("user", "u2")))
    with world.runtime.sessions() as session:
        versions = [k.version for k in keys.repo.kek_versions(session, world.tenant_id)]
    assert versions == ([1, 2] if database == "sqlite" else [1])
    assert len(_details(world, "kek_create")) == len(versions)
    ring.cache.forget([h.id for h in made])
    for handle, subject in zip(made, (U1, ("user", "u2")), strict=True):
        with world.runtime.sessions() as session:
            again = keys.active_key(session, ring, world.tenant_id, subject)
        assert again is not None and (again.id, again.key) == (handle.id, handle.key)
