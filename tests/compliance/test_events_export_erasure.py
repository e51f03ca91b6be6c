"""Export and erasure of a data subject's raw events, curated entries and the compactor
entries built from their events, at the service level on SQLite and PostgreSQL: the export
archives every event with its hash-verified body and says which items are entries; the
erasure deletes events, bodies and compactor entries, counts each layer in the signed
receipt, checks both planes, and survives being killed between its steps."""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.compliance import erasure_walk, export_collect, export_download
from control_plane.compliance import service as compliance
from control_plane.compliance.receipts import served
from control_plane.db.base import new_id, utcnow
from control_plane.db.models import (
    Compaction,
    CompactionEvent,
    ErasureReceipt,
    MemoryEvent,
    MemoryPointer,
)
from control_plane.events import service as events
from control_plane.events.schemas import EventIn
from control_plane.job_handlers import JobWorker
from control_plane.keys import subject_keys as keys
from control_plane.kit import sha256_hex
from control_plane.memories.api import serialise
from control_plane.signing import signing_key
from memplane._receipts import verify_receipt
from tests.support.clock import ManualWallClock
from tests.support.service import ServiceWorld, SimulatedCrash

from .helpers import job, write_subject

SUBJECT, BYSTANDER = "alice", "bob"
LEASE = 3600.0


@dataclass
class Seeded:
    subject_events: dict[uuid.UUID, str]     # id -> body
    bystander_events: dict[uuid.UUID, str]
    subject_memories: dict[str, object]      # path -> value
    entry: MemoryPointer                     # a curated entry of the subject
    from_subject: list[MemoryPointer]        # compactor entries built from subject events
    from_bystander: MemoryPointer            # a compactor entry built from bystander events
    covered_by_bystander: list[uuid.UUID]


def _append(world: ServiceWorld, body: str, **fields: Any) -> MemoryEvent:
    spec = EventIn.model_validate({"kind": "call_summary", "body": body, **fields})
    with world.runtime.sessions() as session:
        event = events.append_event(session, world.runtime.plane, world.actor, spec)
    assert isinstance(event, MemoryEvent)
    return event


def _keyless_pointer(world: ServiceWorld, scope: str, ref: str, summary: str, *,
                     source: str, user_id: str | None = None) -> MemoryPointer:
    """A pointer without a key, as entries and the compactor write them: a sealed summary
    object, then the row."""
    ring = world.runtime.plane.keys
    assert ring is not None
    pointer_id = new_id()
    payload = serialise(summary)
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
        handle = keys.key_for_write(session, ring, world.tenant_id,
                                    keys.subject_of(scope, ref, user_id))
        path = target.path(f"memories/{scope}/{ref}/_entries/{new_id().hex}.json")
        target.adapter.put(path, keys.seal_object(ring, world.tenant_id, handle, path,
                                                  pointer_id, payload))
        now = utcnow()
        pointer = MemoryPointer(
            id=pointer_id, tenant_id=world.tenant_id, scope_type=scope, scope_ref=ref,
            key=None, memory_type="entry", subject_user_id=user_id, tags=[], importance=4,
            source=source, has_embeddings=False, storage_config_id=target.config_id,
            storage_path=path, content_sha256=sha256_hex(payload),
            content_size=len(payload), sync_status="synced", version=1, created_at=now,
            updated_at=now)
        session.add(pointer)
        session.commit()
    return pointer


def _compactor_entry(world: ServiceWorld, covered: list[MemoryEvent]) -> MemoryPointer:
    entry = _keyless_pointer(world, "entity", "ent_acme", "summary of calls", source="compactor")
    with world.runtime.sessions() as session:
        session.add(Compaction(id=entry.id, tenant_id=world.tenant_id, scope_type="entity",
                               scope_ref="ent_acme", provider="offline", model="extractive",
                               prompt_version="1", event_count=len(covered), created_at=utcnow()))
        session.flush()
        for event in covered:
            session.add(CompactionEvent(compaction_id=entry.id, event_id=event.id,
                                        event_sha256=event.content_sha256))
        session.commit()
    return entry


def _seed(world: ServiceWorld) -> Seeded:
    at = datetime(2025, 1, 15, tzinfo=UTC)
    own = [_append(world, f"alice call {n}", scope="user", scope_ref=SUBJECT,
                   occurred_at=at.replace(month=n)) for n in (1, 2)]
    own += [_append(world, f"acme call with alice {n}", scope="entity", scope_ref="ent_acme",
                    user_id=SUBJECT, occurred_at=at.replace(month=n)) for n in (3, 4, 5)]
    others = [_append(world, f"bob call {n}", scope="user", scope_ref=BYSTANDER)
              for n in (1, 2)]
    others += [_append(world, "acme call, nobody named", scope="entity", scope_ref="ent_acme",
                       occurred_at=at)]
    memories = write_subject(world, SUBJECT, 6)
    write_subject(world, BYSTANDER, 3)
    entry = _keyless_pointer(world, "user", SUBJECT, "alice prefers email",
                             source="manual", user_id=SUBJECT)
    from_subject = [_compactor_entry(world, own[2:5]),
                    _compactor_entry(world, [own[0], others[2]])]
    from_bystander = _compactor_entry(world, [others[0], others[2]])
    return Seeded({e.id: b for e, b in zip(own, ["alice call 1", "alice call 2",
                                                   "acme call with alice 3",
                                                   "acme call with alice 4",
                                                   "acme call with alice 5"], strict=True)},
                  {e.id: "" for e in others}, memories, entry, from_subject, from_bystander,
                  [others[0].id, others[2].id])


def _worker(world: ServiceWorld, name: str, clock: ManualWallClock | None = None) -> JobWorker:
    return JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                     owner=name, lease_seconds=LEASE, clock=clock or ManualWallClock())


def _archive(world: ServiceWorld, job_id: uuid.UUID) -> zipfile.ZipFile:
    with world.runtime.sessions() as session:
        chunks, _ = export_download.download(session, world.runtime.plane, world.actor, job_id)
        return zipfile.ZipFile(io.BytesIO(b"".join(chunks)))


def _export(world: ServiceWorld) -> tuple[dict[str, Any], zipfile.ZipFile]:
    with world.runtime.sessions() as session:
        queued = compliance.start_export(session, world.actor, SUBJECT, "json")
    assert _worker(world, "exporter").run_once() == queued.id
    assert job(world, queued.id).state == "completed"
    archive = _archive(world, queued.id)
    return json.loads(archive.read("manifest.json")), archive


def test_export_holds_every_event_with_its_verified_body_and_names_entries(
        world: ServiceWorld) -> None:
    seeded = _seed(world)
    manifest, archive = _export(world)

    assert manifest["counts"] == {
        "pointers": 7, "exported": 7, "missing": 0, "corrupt": 0, "deleted_during_export": 0,
        "bytes": manifest["counts"]["bytes"], "entries": 1, "events": 5,
        "events_exported": 5, "events_missing": 0, "events_corrupt": 0}
    listed = {uuid.UUID(e["event_id"]): e for e in manifest["events"]}
    assert set(listed) == set(seeded.subject_events)
    for event_id, body in seeded.subject_events.items():
        item = listed[event_id]
        data = archive.read(item["file"])
        assert item["file"] == f"events/{event_id}.json"
        assert json.loads(data) == body
        assert sha256_hex(data) == item["content_sha256"] == item["file_sha256"]
        assert item["hash_verified"] is True and item["status"] == "exported"
        assert item["user_id"] == SUBJECT and item["kind"] == "call_summary"
    types = {item["pointer_id"]: item["item_type"] for item in manifest["items"]}
    assert types.pop(str(seeded.entry.id)) == "entry"
    assert set(types.values()) == {"memory"} and len(types) == 6
    assert json.loads(archive.read(f"items/{seeded.entry.id}.json")) == "alice prefers email"
    assert not any("no event log" in n["why"] for n in manifest["not_exported"])
    assert not any(b"bob" in archive.read(name) for name in archive.namelist())


def test_export_lists_a_tampered_event_body_as_corrupt_and_serves_none_of_it(
        world: ServiceWorld) -> None:
    seeded = _seed(world)
    bad = next(iter(seeded.subject_events))
    with world.runtime.sessions() as session:
        event = session.get(MemoryEvent, bad)
        assert event is not None
        target = world.runtime.plane.by_id(session, event.storage_config_id)
        path = event.storage_path
    blob = bytearray(target.adapter.get(path))
    blob[-3] ^= 0x01
    target.adapter.delete_many([path])
    target.adapter.put(path, bytes(blob))

    manifest, archive = _export(world)
    assert (manifest["counts"]["events"], manifest["counts"]["events_exported"],
            manifest["counts"]["events_corrupt"]) == (5, 4, 1)
    item = next(e for e in manifest["events"] if e["event_id"] == str(bad))
    assert (item["status"], item["file"], item["hash_verified"]) == ("corrupt", None, False)
    assert f"events/{bad}.json" not in archive.namelist()
    assert {"what": "raw event body", "event_id": str(bad),
            "why": export_collect._EVENT_WHY["corrupt"]} in manifest["not_exported"]
    with world.runtime.sessions() as session:
        assert session.get(MemoryEvent, bad).sync_status == "corrupt"  # type: ignore[union-attr]


def _event_objects(world: ServiceWorld) -> set[str]:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    return {info.path for info in target.adapter.list_versions(target.path("events") + "/")}


def _all_objects(world: ServiceWorld) -> set[str]:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    return {info.path for prefix in ("events", "memories")
            for info in target.adapter.list_versions(target.path(prefix) + "/")}


def _check_erased(world: ServiceWorld, seeded: Seeded, result: dict[str, Any]) -> None:
    with world.runtime.sessions() as session:
        receipt = session.get(ErasureReceipt, uuid.UUID(result["receipt_id"]))
        assert receipt is not None
        body = {**served(receipt.body, world.runtime.plane.credentials),
                "signature": receipt.signature}
        left_events = set(session.scalars(select(MemoryEvent.id).where(
            MemoryEvent.tenant_id == world.tenant_id)))
        left_pointers = set(session.scalars(select(MemoryPointer.id).where(
            MemoryPointer.tenant_id == world.tenant_id)))
        compactions = set(session.scalars(select(Compaction.id).where(
            Compaction.tenant_id == world.tenant_id)))
        provenance = {(row.compaction_id, row.event_id) for row in session.execute(
            select(CompactionEvent.compaction_id, CompactionEvent.event_id).join(
                Compaction, Compaction.id == CompactionEvent.compaction_id).where(
                Compaction.tenant_id == world.tenant_id))}
        paths = {p.storage_path for p in session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id))}
        paths |= {e.storage_path for e in session.scalars(select(MemoryEvent).where(
            MemoryEvent.tenant_id == world.tenant_id))}
    assert verify_receipt(body, signing_key(world.runtime.settings).public_pem())
    counts = body["counts"]
    assert (counts["events"], counts["compactor_entries"], counts["entries"],
            counts["memories"], counts["pointers"]) == (5, 2, 1, 6, 7)
    # memories, the entry, the compactor entries' objects, the event bodies
    assert counts["objects"] == 6 + 1 + 2 + 5
    assert body["layers"]["events"]["deleted"] == 5
    assert "0 remaining" in body["layers"]["events"]["verified_by"]
    assert body["layers"]["compactor_entries"]["deleted"] == 2
    assert result["counts"]["events"] == 5 and result["counts"]["compactor_entries"] == 2
    assert left_events == set(seeded.bystander_events)
    assert not {e.id for e in seeded.from_subject} & left_pointers
    assert seeded.from_bystander.id in left_pointers and seeded.entry.id not in left_pointers
    assert compactions == {seeded.from_bystander.id}
    assert provenance == {(seeded.from_bystander.id, e) for e in seeded.covered_by_bystander}
    assert len(left_pointers) == 3 + 1
    # the bucket holds exactly what the rows still name
    assert _all_objects(world) == paths
    assert SUBJECT not in json.dumps(body)


def _erase(world: ServiceWorld) -> uuid.UUID:
    with world.runtime.sessions() as session:
        return compliance.start_erasure(session, world.actor, SUBJECT, dry_run=False).id


def test_erasure_deletes_events_and_compactor_entries_and_counts_each_layer(
        world: ServiceWorld) -> None:
    seeded = _seed(world)
    with world.runtime.sessions() as session:
        plan_id = compliance.start_erasure(session, world.actor, SUBJECT, dry_run=True).id
    assert _worker(world, "planner").run_once() == plan_id
    plan = job(world, plan_id).result
    assert plan is not None and (plan["events"], plan["compactor_entries"]) == (5, 2)

    queued = _erase(world)
    assert _worker(world, "eraser").run_once() == queued
    finished = job(world, queued)
    assert finished.state == "completed" and finished.result is not None
    _check_erased(world, seeded, finished.result)
    for event_id in seeded.bystander_events:
        with world.runtime.sessions() as session:
            events.get_event(session, world.runtime.plane, world.actor, event_id)

    again = _erase(world)
    assert _worker(world, "again").run_once() == again
    result = job(world, again).result
    assert result is not None and result["work_done"] is False
    assert result["counts"] == {"pointers": 0, "objects": 0, "versions": 0, "orphans": 0,
                                "exports": 0, "events": 0, "entries": 0,
                                "compactor_entries": 0, "keys": 0,
                                "search_scopes_rewritten": 0, "compactor_events_released": 0}


@pytest.mark.parametrize(("step", "occurrence"), [
    ("erase:after_compactor_objects", 1),
    ("erase:after_event_objects", 2),   # bodies of batch 2 gone, its rows not yet
    ("erase:after_event_batch", 1),
])
def test_a_killed_erasure_of_events_is_taken_over_and_counts_once(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch, step: str,
        occurrence: int) -> None:
    monkeypatch.setattr(erasure_walk, "BATCH", 2)
    seeded = _seed(world)
    seen = {"n": 0}

    def crash(at: str) -> None:
        if at == step:
            seen["n"] += 1
            if seen["n"] == occurrence:
                raise SimulatedCrash(at)

    world.runtime.plane.checkpoint = crash
    clock = ManualWallClock()
    queued = _erase(world)
    with pytest.raises(SimulatedCrash):
        _worker(world, "first", clock).run_once()
    assert job(world, queued).state == "running"
    clock.advance(LEASE + 1)
    assert _worker(world, "second", clock).run_once() == queued
    finished = job(world, queued)
    assert finished.state == "completed" and finished.result is not None
    _check_erased(world, seeded, finished.result)
    # the subject's event log works again once the erasure is over
    assert _append(world, "after", scope="user", scope_ref=SUBJECT).storage_path in \
        _event_objects(world)
