"""Derived data follows its source (DESIGN §12): after a subject's erasure, a copy of the
bucket — every object and every version — opened with the live keyring holds none of the
subject's words, and search finds none of them.

The subject (bob) writes memories carrying a unique word into their own scope, a
conversation, a team, an entity and another user's scope, talks in a conversation, and
appends events to a team's stream next to dan's; the indexer builds each scope's segments
(deltas, then snapshots) and the compactor folds the team's events into one entry built from
both subjects. After bob's erasure the test plays an attacker holding the bucket and the
live keyring: it opens every envelope whose subject key still exists, without the associated
data (AES-GCM's counter stream needs none), and looks for the word in the plaintext.

dan's events, summarised with bob's in the erased entry, lose their ``compressed_at``, and
the next compaction run folds them into an entry of dan's alone.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.keywrap import aes_key_unwrap
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.compactor import selection
from control_plane.compactor import service as compactor
from control_plane.compliance import service as compliance
from control_plane.conversations import service as conversations
from control_plane.conversations.schemas import MessageIn
from control_plane.db.base import utcnow
from control_plane.db.models import (
    Compaction,
    CompactionEvent,
    MemoryEvent,
    MemoryPointer,
    SubjectKey,
)
from control_plane.events import service as events
from control_plane.events.schemas import EventIn
from control_plane.identity import Actor
from control_plane.job_handlers import JobWorker
from control_plane.keys import subject_keys as keys
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.search import indexer
from control_plane.search import service as search
from control_plane.search.schemas import SearchIn
from control_plane.storage_config import service as storage_config
from control_plane.storage_config.schemas import S3ConfigIn
from storage_adapters import envelope
from storage_adapters.envelope import DecryptionError
from storage_adapters.local import LocalAdapter
from tests.support.clock import ManualWallClock
from tests.support.emulators import MotoServer
from tests.support.service import ServiceWorld

SUBJECT, BYSTANDER, OTHER_USER = "bob", "dan", "alice"


def _words() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:12]
    return f"Zqbob{tag}", f"Zqdan{tag}"


# --- what the subject and the others write -------------------------------------------------

def _set(world: ServiceWorld, scope: Scope, ref: str, key: str, text: str,
         user_id: str | None = None) -> MemoryPointer:
    with world.runtime.sessions() as session:
        pointer = memories.set_value(session, world.runtime.plane, world.actor,
                                     MemoryAddress.parse(scope, ref, key), {"note": text},
                                     MemoryMeta(user_id=user_id))
    assert isinstance(pointer, MemoryPointer)
    return pointer


def _events(world: ServiceWorld, scope: str, ref: str, user_id: str, bodies: list[str],
            *, age_days: int) -> list[uuid.UUID]:
    ids = []
    with world.runtime.sessions() as session:
        for i, body in enumerate(bodies):
            spec = EventIn(scope=scope, scope_ref=ref, kind="call_summary", body=body,  # type: ignore[arg-type]
                           occurred_at=utcnow() - timedelta(days=age_days, minutes=i),
                           user_id=user_id)
            event = events.append_event(session, world.runtime.plane, world.actor, spec)
            assert isinstance(event, MemoryEvent)
            ids.append(event.id)
    return ids


def _index(world: ServiceWorld) -> None:
    runtime = world.runtime
    with runtime.sessions() as session:
        indexer.drain(session, runtime.plane, runtime, runtime.search_cache, compact_after=2)


def _compact(world: ServiceWorld) -> dict[str, Any]:
    with world.runtime.sessions() as session:
        return compactor.compact_tenant(
            session, world.runtime.plane, world.runtime.settings, world.tenant_id,
            actor=Actor(world.tenant_id, "system", "test-run")).as_dict()


def _seed(world: ServiceWorld, word: str, dan_word: str,
          legacy: pytest.MonkeyPatch | None = None) -> dict[str, list[uuid.UUID]]:
    """Bob's words in every kind of scope and derived layer; dan's beside them. With
    ``legacy``, the team's events are folded as the compactor did before each subject's
    events got an entry of their own: one entry for both subjects."""
    said = f"{SUBJECT} said {word} about the plan"
    _set(world, Scope.user, SUBJECT, "diet", f"{said} (own scope)")
    _index(world)  # a first delta per scope; later rounds add deltas, then snapshots
    _set(world, Scope.conversation, "c-shared", "flight", f"{said} (conversation)", SUBJECT)
    _set(world, Scope.team, "T9", "bobnote", f"{said} (team)", SUBJECT)
    _set(world, Scope.entity, "ent_acme", "bobcall", f"{said} (entity)", SUBJECT)
    _set(world, Scope.user, OTHER_USER, "about-bob", f"{said} (alice's scope)", SUBJECT)
    _set(world, Scope.team, "T9", "dannote", f"{BYSTANDER} said {dan_word} (team)",
         BYSTANDER)
    _set(world, Scope.user, OTHER_USER, "own", f"alice keeps {dan_word} too")
    with world.runtime.sessions() as session:
        conversations.add_message(session, world.runtime.plane, world.runtime.settings,
                                  world.actor, "c-bob",
                                  MessageIn(role="user", content=f"{said} (chat)",  # type: ignore[arg-type]
                                            user_id=SUBJECT))
    _index(world)
    _set(world, Scope.team, "T9", "bobnote", f"{said} again (team, v2)", SUBJECT)
    _set(world, Scope.entity, "ent_acme", "bobcall", f"{said} again (entity, v2)", SUBJECT)
    _index(world)
    bob_events = _events(world, "team", "T9", SUBJECT, [
        f"Bob decided to move 20% of the budget to {word} in Q3.",
        f"Bob will sign the {word} contract for $120k.",
    ], age_days=120)
    dan_events = _events(world, "team", "T9", BYSTANDER, [
        f"Dan agreed to hire 2 designers for {dan_word} by March 3.",
        f"Dan approved the {dan_word} launch budget of $40k.",
        f"Dan will renew {dan_word} for 12 months.",
    ], age_days=110)  # enough for a bucket of dan's alone to be due (3 events)
    with pytest.MonkeyPatch.context() as patch:
        if legacy is not None:
            patch.setattr(selection, "by_subject", lambda events, _sizes: [list(events)])
        counts = _compact(world)
    assert counts["entries_written"] == (1 if legacy else 2)
    assert counts["events_compressed"] == 5
    _index(world)  # the entry's summary lands in the team's segments too
    return {"bob_events": bob_events, "dan_events": dan_events}


# --- the attacker: a copy of the bucket and the live keyring ------------------------------

def _local_copy(world: ServiceWorld) -> Iterator[tuple[str, bytes]]:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    assert isinstance(target.adapter, LocalAdapter)
    root = target.adapter.root
    for directory, _dirs, files in os.walk(root):  # hidden directories included
        for name in files:
            path = Path(directory, name)
            yield str(path.relative_to(root)), path.read_bytes()


def _s3_copy(moto: MotoServer, bucket: str) -> Iterator[tuple[str, bytes]]:
    client = moto.client()
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for version in page.get("Versions", []):
            body = client.get_object(Bucket=bucket, Key=version["Key"],
                                     VersionId=version["VersionId"])["Body"].read()
            yield f"{version['Key']}@{version['VersionId']}", body


def _live_keys(world: ServiceWorld) -> dict[uuid.UUID, bytes]:
    """Every subject key of the tenant that still exists, unwrapped with the live keyring."""
    ring = world.runtime.plane.keys
    assert ring is not None
    found = {}
    with world.runtime.sessions() as session:
        ids = session.scalars(select(SubjectKey.id).where(
            SubjectKey.tenant_id == world.tenant_id,
            SubjectKey.wrapped_key.is_not(None))).all()
        for key_id in ids:
            found[key_id] = keys.key_to_open(session, ring, world.tenant_id, key_id)
    return found


def _plaintext(blob: bytes, live: dict[uuid.UUID, bytes]) -> bytes | None:
    """What the live keys open of ``blob``: its bytes if it is no envelope, None if its key
    is gone. The chunks are decrypted as AES-CTR (GCM's keystream starts at counter 2), so
    neither the path, the object id nor the tag is needed."""
    if not envelope.is_envelope(blob):
        return blob
    try:
        header = envelope.read_header(blob)
    except DecryptionError:
        return blob
    subject_key = live.get(header.key_id)
    if subject_key is None:
        return None
    data_key = aes_key_unwrap(subject_key, header.wrapped_key)
    out, offset = [], envelope.HEADER_BYTES
    full = envelope.NONCE_BYTES + header.chunk_size + envelope.TAG_BYTES
    while offset < len(blob):
        chunk = blob[offset:offset + full]
        offset += len(chunk)
        nonce, body = chunk[:envelope.NONCE_BYTES], chunk[envelope.NONCE_BYTES:-envelope.TAG_BYTES]
        stream = Cipher(algorithms.AES(data_key),
                        modes.CTR(nonce + (2).to_bytes(4, "big"))).decryptor()
        out.append(stream.update(body) + stream.finalize())
    return b"".join(out)


def _readable(copy: Iterator[tuple[str, bytes]], live: dict[uuid.UUID, bytes],
              word: str) -> tuple[list[str], int]:
    """The objects whose readable bytes hold ``word``, and how many objects were opened."""
    hits, opened = [], 0
    for name, blob in copy:
        plain = _plaintext(blob, live)
        if plain is None:
            continue
        opened += 1
        if word.encode() in plain or word.lower().encode() in plain.lower():
            hits.append(name)
    return hits, opened


# --- the erasure ------------------------------------------------------------------------------

def _erase(world: ServiceWorld, user_id: str = SUBJECT) -> dict[str, Any]:
    with world.runtime.sessions() as session:
        queued = compliance.start_erasure(session, world.actor, user_id, dry_run=False).id
    worker = JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                       owner="eraser", lease_seconds=3600, clock=ManualWallClock())
    # The database is shared with other tests, whose tenants' jobs may be claimed first (the
    # worker serves the tenant served longest ago): run jobs as a worker would until ours ran.
    ran = [worker.run_once() for _ in range(1)]
    while ran[-1] not in (queued, None) and len(ran) < 50:
        ran.append(worker.run_once())
    assert ran[-1] == queued, ran
    with world.runtime.sessions() as session:
        from control_plane.db.models import Job

        job = session.get(Job, queued)
        assert job is not None and job.state == "completed", job and job.error
        assert job.result is not None
        return dict(job.result)


def _search(world: ServiceWorld, query: str) -> dict[str, str]:
    """Every hit of a search (address -> the text it was indexed from)."""
    with world.runtime.sessions() as session:
        found = search.search(session, world.runtime, world.actor,
                              SearchIn(query=query, limit=100, include_values=False))
    return {f"{r.scope}/{r.scope_ref}/{r.key}": r.text for r in found.hits}


def _check_nothing_readable(world: ServiceWorld, backup: list[tuple[str, bytes]], copy: Any,
                            word: str, dan_word: str) -> None:
    """Neither the copy taken before the erasure (a backup) nor the bucket as it is now holds
    a readable word of the subject."""
    live = _live_keys(world)
    hits, opened = _readable(iter(backup), live, word)
    assert hits == []
    hits, _ = _readable(copy(), live, word)
    assert hits == []
    # The attacker is not blind: the bystanders' words still open from the same copy.
    dan_hits, _ = _readable(iter(backup), live, dan_word)
    assert opened > 5 and len(dan_hits) >= 3
    found = _search(world, word)
    assert [a for a, t in found.items() if word.lower() in t.lower()] == []
    assert not [a for a in found if SUBJECT in a]
    assert dan_word in _search(world, dan_word)["team/T9/dannote"]


def _dan_refolded(world: ServiceWorld, dan_events: list[uuid.UUID]) -> None:
    with world.runtime.sessions() as session:
        marked = dict(session.execute(select(MemoryEvent.id, MemoryEvent.compressed_at).where(
            MemoryEvent.tenant_id == world.tenant_id)).all())
    assert marked == {e: None for e in dan_events}
    assert _compact(world)["entries_written"] == 1
    with world.runtime.sessions() as session:
        entries = session.execute(select(MemoryPointer.id, MemoryPointer.subject_user_id)
                                  .where(MemoryPointer.tenant_id == world.tenant_id,
                                         MemoryPointer.source == "compactor")).all()
        covered = set(session.scalars(select(CompactionEvent.event_id).join(
            Compaction, Compaction.id == CompactionEvent.compaction_id)
            .where(Compaction.tenant_id == world.tenant_id)))
        folded = session.scalars(select(MemoryEvent.id).where(
            MemoryEvent.tenant_id == world.tenant_id,
            MemoryEvent.compressed_at.is_not(None))).all()
    assert [e.subject_user_id for e in entries] == [BYSTANDER]
    assert covered == set(dan_events) and set(folded) == set(dan_events)


def test_erased_subject_leaves_no_readable_word_in_derived_data(
        world: ServiceWorld) -> None:
    word, dan_word = _words()
    _seed(world, word, dan_word)
    before, _ = _readable(_local_copy(world), _live_keys(world), word)
    assert len(before) >= 8  # memories, message, events, entry, vectors, segments
    assert any("/@search/" in hit for hit in before)
    backup = list(_local_copy(world))

    result = _erase(world)

    counts = result["counts"]
    assert counts["compactor_entries"] == 1  # bob's own; dan's stays
    assert counts["compactor_events_released"] == 0
    # the scopes that indexed bob's memories or entry: user/bob, user/alice,
    # conversation/c-shared, conversation/c-bob, team/T9, entity/ent_acme
    assert counts["search_scopes_rewritten"] >= 6
    _check_nothing_readable(world, backup, lambda: _local_copy(world), word, dan_word)


def test_erasing_one_subject_of_a_mixed_compactor_entry_refolds_the_others_events(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    word, dan_word = _words()
    seeded = _seed(world, word, dan_word, legacy=monkeypatch)

    result = _erase(world)

    counts = result["counts"]
    assert (counts["compactor_entries"], counts["compactor_events_released"]) == (1, 3)
    live = _live_keys(world)
    assert _readable(_local_copy(world), live, word)[0] == []
    _dan_refolded(world, seeded["dan_events"])
    refolded = _readable(_local_copy(world), live, dan_word)[0]
    assert any("/@entries/" in hit for hit in refolded)


def test_erasure_on_a_versioned_bucket_leaves_no_readable_version(
        world: ServiceWorld, moto_server: MotoServer, versioned_s3_config: dict[str, Any]) -> None:
    with world.runtime.sessions() as session:
        saved = storage_config.configure(
            session, world.runtime.plane, world.actor,
            S3ConfigIn.model_validate({"storage_type": "s3",
                                       "connection_config": versioned_s3_config}),
            allow_local=False, local_roots=[Path("/nonexistent")])
    assert saved.versioning is True
    word, dan_word = _words()
    _seed(world, word, dan_word)

    def copy() -> Iterator[tuple[str, bytes]]:
        return _s3_copy(moto_server, versioned_s3_config["bucket"])

    before, _ = _readable(copy(), _live_keys(world), word)
    assert any("/@search/" in hit for hit in before)
    backup = list(copy())

    result = _erase(world)

    assert result["counts"]["compactor_entries"] == 1
    _check_nothing_readable(world, backup, copy, word, dan_word)


def test_a_compaction_run_folds_each_subjects_events_into_an_entry_of_their_own(
        world: ServiceWorld) -> None:
    word, dan_word = _words()
    bob = _events(world, "team", "T9", SUBJECT, [f"Bob will sign the {word} deal."] * 2,
                  age_days=120)
    dan = _events(world, "team", "T9", BYSTANDER, [f"Dan will hire for {dan_word}."] * 2,
                  age_days=110)

    assert _compact(world)["entries_written"] == 2

    with world.runtime.sessions() as session:
        entries = {p.subject_user_id: p for p in session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.source == "compactor"))}
        covered = {e.subject_user_id: {c for c in session.scalars(
            select(CompactionEvent.event_id).where(CompactionEvent.compaction_id == e.id))}
            for e in entries.values()}
    assert covered == {SUBJECT: set(bob), BYSTANDER: set(dan)}
    # Each entry is sealed under its subject's key: once bob's is destroyed, a copy of the
    # bucket taken before the erasure no longer opens bob's entry; dan's still opens.
    backup = list(_local_copy(world))
    before, _ = _readable(iter(backup), _live_keys(world), word)
    assert any("/@entries/" in hit for hit in before)
    _erase(world)
    live = _live_keys(world)
    assert _readable(iter(backup), live, word)[0] == []
    assert any("/@entries/" in hit for hit in _readable(iter(backup), live, dan_word)[0])
