"""One compaction run at the service level, on SQLite and PostgreSQL, with real encrypted
event bodies in a local bucket and the offline summariser: what it writes (one entry per
due bucket, the events marked, provenance), crashes at each step and a rerun, two runs
racing for a bucket, a failing summariser, a spent budget, an erasure in progress."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.compactor import service as compactor
from control_plane.compactor.provenance import provenance as entry_provenance
from control_plane.db.base import utcnow
from control_plane.db.models import (
    AccessLog,
    Compaction,
    CompactionEvent,
    MemoryEvent,
    MemoryPointer,
    SubjectErasure,
)
from control_plane.entries import service as entries
from control_plane.events import service as events
from control_plane.events.schemas import EventIn
from control_plane.identity import Actor
from control_plane.integrity.reconcile import collect_orphans
from control_plane.plane.data_plane import no_faults
from control_plane.summarizers import (
    BudgetSpent,
    EventText,
    Summarizer,
    SummarizerFailed,
    Summary,
    TokenBudget,
)
from control_plane.summarizers.service import summarizer_for
from tests.support.clock import DEADLINE_SECONDS
from tests.support.service import ServiceWorld, SimulatedCrash

from .helpers import new_tenant, own_runtime

ACME = [
    "## Call with Acme\nWe agreed to raise the ROAS target to 4 for Q3. Weather was nice.",
    "Maria Lopez decided to move 20% of the budget to Meta from 2025-04-01.",
    "Small talk about the weekend. Nothing else.",
    "Acme will renew the contract for $120k if the pilot hits 3.5 ROAS.",
]
PROJECT = [
    "Kick-off: Alice owns the launch plan, deadline March 3.",
    "Alice approved the new landing page copy.",
    "Alice must hire two designers before Q2.",
]


@pytest.fixture
def world(database: str, request: pytest.FixtureRequest,
          tmp_path: Path) -> Iterator[ServiceWorld]:
    with own_runtime(database, request, tmp_path) as runtime:
        w = ServiceWorld(runtime, new_tenant(runtime))
        runtime.plane.checkpoint = w.checkpoint
        try:
            yield w
        finally:
            runtime.plane.checkpoint = no_faults


def append(world: ServiceWorld, scope: str, ref: str, bodies: Sequence[str], *,
           age_days: int = 120, user_id: str | None = None) -> list[uuid.UUID]:
    ids = []
    with world.runtime.sessions() as session:
        for i, body in enumerate(bodies):
            spec = EventIn(scope=scope, scope_ref=ref, kind="call_summary", body=body,
                           occurred_at=utcnow() - timedelta(days=age_days - i),
                           user_id=user_id)  # type: ignore[arg-type]
            event = events.append_event(session, world.runtime.plane, world.actor, spec)
            assert isinstance(event, MemoryEvent)
            ids.append(event.id)
    return ids


def run(world: ServiceWorld, summarizer: Summarizer | None = None,
        **kw: Any) -> dict[str, Any]:
    with world.runtime.sessions() as session:
        return compactor.compact_tenant(
            session, world.runtime.plane, world.runtime.settings, world.tenant_id,
            actor=Actor(world.tenant_id, "system", "test-run"), summarizer=summarizer,
            **kw).as_dict()


def counts(**kw: Any) -> dict[str, Any]:
    return {"buckets": 0, "compacted_buckets": 0, "events_compressed": 0,
            "entries_written": 0, "failed_buckets": 0, "skipped_buckets": 0,
            "budget_spent": False, "dry_run": False, "failures": {}} | kw


def compactor_entries(world: ServiceWorld) -> list[MemoryPointer]:
    with world.runtime.sessions() as session:
        return list(session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.source == "compactor")
            .order_by(MemoryPointer.scope_type, MemoryPointer.scope_ref,
                      MemoryPointer.created_at)))


def compressed(world: ServiceWorld) -> set[uuid.UUID]:
    with world.runtime.sessions() as session:
        return set(session.scalars(select(MemoryEvent.id).where(
            MemoryEvent.tenant_id == world.tenant_id, MemoryEvent.compressed_at.is_not(None))))


def covered(world: ServiceWorld) -> Counter[uuid.UUID]:
    """How many compactor entries cover each event (provenance rows)."""
    with world.runtime.sessions() as session:
        return Counter(session.scalars(select(CompactionEvent.event_id).join(
            Compaction, Compaction.id == CompactionEvent.compaction_id).where(
            Compaction.tenant_id == world.tenant_id)))


def summary_of(world: ServiceWorld, entry_id: uuid.UUID) -> str:
    with world.runtime.sessions() as session:
        return str(entries.get_entry(session, world.runtime.plane, world.actor,
                                     entry_id).summary)


def test_a_run_writes_one_entry_per_due_bucket_and_marks_exactly_its_events(
        world: ServiceWorld) -> None:
    acme = append(world, "entity", "ent_acme", ACME)
    project = append(world, "project", "p1", PROJECT, user_id="alice")
    small = append(world, "entity", "ent_small", ACME[:2])
    young = append(world, "entity", "ent_acme", ACME[:3], age_days=10)

    # ent_acme is due by its old events: its young ones are folded with them.
    assert run(world) == counts(buckets=2, compacted_buckets=2, events_compressed=10,
                                entries_written=2)
    assert compressed(world) == set(acme) | set(young) | set(project)
    assert covered(world) == Counter(acme + young + project)

    by_scope = {(p.scope_type, p.scope_ref): p for p in compactor_entries(world)}
    assert set(by_scope) == {("entity", "ent_acme"), ("project", "p1")}
    entry, alice = by_scope["entity", "ent_acme"], by_scope["project", "p1"]
    first = (utcnow() - timedelta(days=120)).date()
    last = (utcnow() - timedelta(days=8)).date()
    assert entry.title == f"Compacted: 7 events, {first:%Y-%m-%d} – {last:%Y-%m-%d}"
    assert (entry.memory_type, entry.key, entry.importance, entry.tags, entry.source) == \
        ("entry", None, 4, ["compacted"], "compactor")
    assert (entry.subject_user_id, alice.subject_user_id) == (None, "alice")
    assert alice.title is not None and "Alice" not in alice.title

    text = summary_of(world, entry.id)
    assert "ROAS target to 4" in text and "20% of the budget" in text
    assert "Small talk" not in text and "Weather was nice" not in text

    with world.runtime.sessions() as session:
        provenance = entry_provenance(session, world.actor, entry.id)
        rows = {e.id: e.content_sha256 for e in session.scalars(
            select(MemoryEvent).where(MemoryEvent.id.in_(acme + young)))}
        audit = list(session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "compact")))
    assert (provenance.provider, provenance.model, provenance.prompt_version) == \
        ("memplane", "extractive-v1", "extract-v1")
    assert [(e.event_id, e.event_sha256) for e in provenance.events] == \
        [(i, rows[i]) for i in acme + young]
    assert provenance.event_count == 7 and provenance.job_id is None
    assert sorted(audit) == ["3 events summarised by memplane extractive-v1 prompt extract-v1",
                             "7 events summarised by memplane extractive-v1 prompt extract-v1"]

    # A rerun finds nothing due: no event is summarised twice.
    assert run(world) == counts()
    assert len(compactor_entries(world)) == 2
    assert not compressed(world) & set(small)


@pytest.mark.parametrize("group", [1, 2])
@pytest.mark.parametrize("step", ["compact:summarised", "entry:after_put", "compact:marking",
                                  "entry:before_commit", "compact:group_written",
                                  "compact:committed"])
def test_a_crash_at_any_step_then_a_rerun_summarises_each_event_once(
        world: ServiceWorld, step: str, group: int) -> None:
    """With one entry per transaction the crash hits the first bucket's; with two, the
    group holding both buckets' entries: it lands whole or not at all."""
    acme = append(world, "entity", "ent_acme", ACME)
    project = append(world, "project", "p1", PROJECT)
    world.crash_at = step
    if group == 1 and step == "compact:group_written":
        return  # a step of group writes only
    with pytest.raises(SimulatedCrash):
        run(world, writers=1, group=group)  # one writer: the crash hits the first write
    committed = step == "compact:committed"
    # The first write (entity/ent_acme's entry, or the group of both) landed whole or not
    # at all: each entry with its marks and provenance.
    landed = (acme if group == 1 else acme + project) if committed else []
    assert len(compactor_entries(world)) == (group if committed else 0)
    assert compressed(world) == set(landed)
    assert covered(world) == Counter(landed)

    left = 2 - len(compactor_entries(world))
    assert run(world) == counts(buckets=left, compacted_buckets=left,
                                events_compressed=7 - len(landed), entries_written=left)
    assert len(compactor_entries(world)) == 2
    assert compressed(world) == set(acme) | set(project)
    assert covered(world) == Counter(acme + project)  # each event in exactly one entry
    # What a crash between the put and the commit left is an object no pointer names:
    # orphan GC removes it, and every entry still reads.
    with world.runtime.sessions() as session:
        orphans = collect_orphans(session, world.runtime.plane, grace_seconds=0,
                                  tenant_id=world.tenant_id)
    left_behind = step in ("entry:after_put", "compact:marking", "entry:before_commit",
                           "compact:group_written")
    assert orphans.orphans_deleted == (group if left_behind else 0)
    for entry in compactor_entries(world):
        assert summary_of(world, entry.id).startswith("- ")


def test_two_runs_racing_for_a_bucket_commit_one_entry(world: ServiceWorld) -> None:
    """Run A has read and summarised the bucket when run B compacts it; A's commit then
    finds the events marked and drops its entry: one entry, each event once."""
    acme = append(world, "entity", "ent_acme", ACME)
    summarised, go_on = threading.Event(), threading.Event()

    def checkpoint(step: str) -> None:
        if step == "compact:summarised" and threading.current_thread().name == "run-a":
            summarised.set()
            assert go_on.wait(DEADLINE_SECONDS)

    world.runtime.plane.checkpoint = checkpoint
    results: dict[str, dict[str, Any]] = {}
    first = threading.Thread(target=lambda: results.update(a=run(world)), name="run-a")
    first.start()
    assert summarised.wait(DEADLINE_SECONDS)
    results["b"] = run(world)
    go_on.set()
    first.join(DEADLINE_SECONDS)

    assert results["b"] == counts(buckets=1, compacted_buckets=1, events_compressed=4,
                                  entries_written=1)
    assert results["a"] == counts(buckets=1, skipped_buckets=1)
    assert len(compactor_entries(world)) == 1
    assert covered(world) == Counter(acme)
    with world.runtime.sessions() as session:
        orphans = collect_orphans(session, world.runtime.plane, grace_seconds=0,
                                  tenant_id=world.tenant_id)
    assert orphans.marked == 0  # A's object was deleted when its commit was refused


def test_a_group_with_a_bucket_compacted_meanwhile_writes_the_others_one_by_one(
        world: ServiceWorld) -> None:
    """Run A has summarised both buckets of its group when run B compacts one of them: A's
    group commits nothing, then A writes its entries one by one — the bucket B took is
    passed over, the other lands. One entry per bucket, each event once."""
    acme = append(world, "entity", "ent_acme", ACME)
    project = append(world, "project", "p1", PROJECT)
    summarised, go_on = threading.Event(), threading.Event()
    seen = Counter[str]()

    def checkpoint(step: str) -> None:
        if step == "compact:summarised" and threading.current_thread().name == "run-a":
            seen[step] += 1
            if seen[step] == 2:  # both chunks summarised; the group is submitted next
                summarised.set()
                assert go_on.wait(DEADLINE_SECONDS)

    world.runtime.plane.checkpoint = checkpoint
    results: dict[str, dict[str, Any]] = {}
    first = threading.Thread(target=lambda: results.update(a=run(world, group=2)),
                             name="run-a")
    first.start()
    assert summarised.wait(DEADLINE_SECONDS)
    results["b"] = run(world, scope="entity", scope_ref="ent_acme")
    go_on.set()
    first.join(DEADLINE_SECONDS)

    assert results["b"] == counts(buckets=1, compacted_buckets=1, events_compressed=4,
                                  entries_written=1)
    assert results["a"] == counts(buckets=2, compacted_buckets=1, events_compressed=3,
                                  entries_written=1, skipped_buckets=1)
    assert [(p.scope_ref) for p in compactor_entries(world)] == ["ent_acme", "p1"]
    assert covered(world) == Counter(acme + project)
    with world.runtime.sessions() as session:
        orphans = collect_orphans(session, world.runtime.plane, grace_seconds=0,
                                  tenant_id=world.tenant_id)
    assert orphans.marked == 0  # the refused group's objects and A's single were deleted


@dataclass
class Scripted:
    """A summariser that fails for chosen scope refs (real objects, no mocks)."""

    fail: dict[str, BaseException]
    provider: str = "scripted"
    model: str = "m1"
    prompt_version: str = "p1"

    def summarize(self, scope: str, scope_ref: str, events: Sequence[EventText]) -> Summary:
        if scope_ref in self.fail:
            raise self.fail[scope_ref]
        return Summary(f"- {len(events)} events of {scope_ref}", self.provider, self.model,
                       self.prompt_version, tokens_used=10)


def test_a_failing_bucket_marks_nothing_and_is_retried_next_run(world: ServiceWorld) -> None:
    acme = append(world, "entity", "ent_acme", ACME)
    project = append(world, "project", "p1", PROJECT)
    failing = Scripted({"ent_acme": SummarizerFailed("timeout")})
    assert run(world, failing) == counts(buckets=2, compacted_buckets=1, events_compressed=3,
                                         entries_written=1, failed_buckets=1,
                                         failures={"timeout": 1})
    assert compressed(world) == set(project)
    assert [p.scope_ref for p in compactor_entries(world)] == ["p1"]

    assert run(world, Scripted({})) == counts(buckets=1, compacted_buckets=1,
                                              events_compressed=4, entries_written=1)
    assert compressed(world) == set(acme) | set(project)
    with world.runtime.sessions() as session:
        models = set(session.execute(select(Compaction.provider, Compaction.model,
                                            Compaction.prompt_version)).all())
    assert models == {("scripted", "m1", "p1")}


def test_a_failing_bucket_leaves_the_rest_of_its_group_to_commit(
        world: ServiceWorld) -> None:
    acme = append(world, "entity", "ent_acme", ACME)
    project = append(world, "project", "p1", PROJECT)
    growth = append(world, "team", "growth", PROJECT)
    failing = Scripted({"p1": SummarizerFailed("timeout")})
    assert run(world, failing, group=3) == counts(
        buckets=3, compacted_buckets=2, events_compressed=7, entries_written=2,
        failed_buckets=1, failures={"timeout": 1})
    assert compressed(world) == set(acme) | set(growth)
    assert covered(world) == Counter(acme + growth)
    assert [p.scope_ref for p in compactor_entries(world)] == ["ent_acme", "growth"]
    with world.runtime.sessions() as session:
        compacted = sorted(map(str, session.scalars(select(AccessLog.pointer_id).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "compact"))))
        written = sorted(map(str, session.scalars(select(AccessLog.pointer_id).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "write",
            AccessLog.pointer_id.is_not(None), AccessLog.success.is_(True)))))
    ids = sorted(str(p.id) for p in compactor_entries(world))
    assert compacted == written == ids  # each entry audited as written and as compacted

    assert run(world, Scripted({})) == counts(buckets=1, compacted_buckets=1,
                                              events_compressed=3, entries_written=1)
    assert compressed(world) == set(acme) | set(project) | set(growth)


def test_a_spent_budget_stops_the_run_cleanly(world: ServiceWorld) -> None:
    acme = append(world, "entity", "ent_acme", ACME)
    append(world, "project", "p1", PROJECT)
    budget = Scripted({"p1": BudgetSpent(500, 20)})
    assert run(world, budget) == counts(buckets=2, compacted_buckets=1, events_compressed=4,
                                        entries_written=1, budget_spent=True)
    assert compressed(world) == set(acme)


def test_the_offline_summariser_is_the_tenants_default(
        world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        summarizer = summarizer_for(session, world.runtime.settings, world.tenant_id,
                                    TokenBudget())
    assert (summarizer.provider, summarizer.model) == ("memplane", "extractive-v1")


def test_an_erasure_in_progress_holds_its_subjects_bucket_back(world: ServiceWorld) -> None:
    append(world, "entity", "ent_acme", ACME)
    project = append(world, "project", "p1", PROJECT, user_id="alice")
    with world.runtime.sessions() as session:
        session.add(SubjectErasure(tenant_id=world.tenant_id, user_id="alice",
                                   job_id=uuid.uuid4()))
        session.commit()
    result = run(world)
    assert result == counts(buckets=2, compacted_buckets=1, events_compressed=4,
                            entries_written=1, failed_buckets=1,
                            failures={"subject_erasure_in_progress": 1})
    assert not compressed(world) & set(project)


def test_a_large_bucket_becomes_several_entries_of_about_equal_size(
        world: ServiceWorld) -> None:
    world.runtime.settings.compactor_max_events_per_entry = 200
    try:
        ids = append(world, "team", "growth", [f"Event {i}: we agreed on item {i}."
                                               for i in range(401)], age_days=500)
        assert run(world, Scripted({})) == counts(buckets=1, compacted_buckets=1,
                                                  events_compressed=401, entries_written=3)
    finally:
        world.runtime.settings.compactor_max_events_per_entry = 1000
    with world.runtime.sessions() as session:
        sizes = sorted(session.scalars(select(Compaction.event_count)))
    assert sizes == [133, 134, 134]
    assert covered(world) == Counter(ids)
