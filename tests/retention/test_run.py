"""The retention run through the services, on SQLite and PostgreSQL, with an injected clock
(``now``): policies and the ttl_days purge delete on both planes with one audit row per item
naming the policy, ``auto_delete: false`` and dry runs only count, holds keep what they
cover, and lists hide what is due before the run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from control_plane.db.base import utcnow
from control_plane.events import service as events_service
from control_plane.memories import read as memories_read
from tests.retention.helpers import (
    backdate,
    deletes,
    event,
    event_rows,
    objects,
    pointers,
    policy,
    put,
    run,
)
from tests.support.clock import ManualWallClock
from tests.support.service import ServiceWorld


def test_a_policy_deletes_what_is_due_on_both_planes_and_audits_each(
        world: ServiceWorld) -> None:
    clock = ManualWallClock()
    policy_id = policy(world, scope="user", memory_type="conversation_history",
                       retention_days=90, auto_delete=True)
    old = [put(world, "user", "u1", "chat-1", memory_type="conversation_history"),
           put(world, "user", "u1", "chat-2", memory_type="conversation_history"),
           put(world, "user", "u2", "chat-1x", memory_type="conversation_history")]
    kept = put(world, "user", "u1", "prefs", memory_type="preference")
    other_scope = put(world, "agent", "bot", "chat", memory_type="conversation_history")
    assert len(objects(world, "memories")) == 5

    clock.advance(89 * 86400)
    early = run(world, clock())
    assert (early["deleted"], early["policies"][0]["due"]) == (0, 0)
    assert len(pointers(world)) == 5

    clock.advance(2 * 86400)
    planned = run(world, clock(), dry_run=True)
    assert planned["policies"] == [{
        "policy_id": str(policy_id), "scope": "user", "memory_type": "conversation_history",
        "auto_delete": True, "due": 3, "deleted": 0, "held": 0, "archived": 0,
        "archive_failed": 0}]
    assert (planned["dry_run"], planned["deleted"]) == (True, 0)
    assert len(pointers(world)) == 5

    done = run(world, clock())
    assert (done["deleted"], done["policies"][0]["deleted"], done["held"]) == (3, 3, 0)
    assert set(pointers(world)) == {"prefs", "chat"}
    assert objects(world, "memories") == {kept.storage_path, other_scope.storage_path}
    rows = deletes(world)
    assert sorted(r.pointer_id for r in rows) == sorted(p.id for p in old)  # type: ignore[type-var]
    assert {(r.accessor_type, r.detail) for r in rows} == {
        ("api", f"retention policy {policy_id} (user/conversation_history, 90 days)")}

    again = run(world, clock())
    assert again["deleted"] == 0
    assert len(deletes(world)) == 3


def test_without_auto_delete_the_run_reports_what_is_due_and_deletes_nothing(
        world: ServiceWorld) -> None:
    clock = ManualWallClock()
    policy(world, scope="team", retention_days=30, auto_delete=False)
    for n in range(4):
        put(world, "team", "t1", f"k{n}", memory_type="team_context")
    clock.advance(31 * 86400)
    result = run(world, clock())
    assert result["policies"][0]["memory_type"] is None
    assert (result["policies"][0]["due"], result["deleted"]) == (4, 0)
    assert len(pointers(world)) == 4
    assert len(objects(world, "memories")) == 4
    assert deletes(world) == []


def test_the_most_specific_policy_of_a_scope_wins(world: ServiceWorld) -> None:
    clock = ManualWallClock()
    policy(world, scope="user", retention_days=10, auto_delete=True)
    policy(world, scope="user", memory_type="preference", retention_days=365, auto_delete=True)
    put(world, "user", "u1", "fact", memory_type="fact")
    put(world, "user", "u1", "pref", memory_type="preference")
    clock.advance(11 * 86400)
    result = run(world, clock())
    assert sorted((p["memory_type"], p["deleted"]) for p in result["policies"]
                  if p["memory_type"]) == [("preference", 0)]
    assert result["deleted"] == 1
    assert set(pointers(world)) == {"pref"}


def test_expired_ttl_memories_are_purged_the_same_way(world: ServiceWorld) -> None:
    clock = ManualWallClock()
    short = put(world, "user", "u1", "short", ttl_days=1)
    put(world, "user", "u1", "long", ttl_days=10)
    put(world, "user", "u1", "forever")
    clock.advance(2 * 86400)
    assert run(world, clock(), dry_run=True)["ttl"] == {"due": 1, "deleted": 0, "held": 0}
    result = run(world, clock())
    assert result["ttl"] == {"due": 0, "deleted": 1, "held": 0}
    assert set(pointers(world)) == {"long", "forever"}
    assert short.storage_path not in objects(world, "memories")
    assert [(r.pointer_id, r.detail) for r in deletes(world)] == [(short.id, "ttl_days expired")]


def test_event_policies_delete_old_events_and_their_bodies(world: ServiceWorld) -> None:
    now = utcnow()
    policy_id = policy(world, scope="entity", memory_type="event", retention_days=365,
                       auto_delete=True)
    old = event(world, now - timedelta(days=400))
    recent = event(world, now - timedelta(days=10))
    other = event(world, now - timedelta(days=400), scope="project", ref="p1")
    assert len(objects(world, "events")) == 3

    result = run(world, now)

    assert result["policies"][0]["deleted"] == 1
    assert {e.id for e in event_rows(world)} == {recent.id, other.id}
    assert objects(world, "events") == {recent.storage_path, other.storage_path}
    assert [(r.event_id, r.detail) for r in deletes(world)] == [
        (old.id, f"retention policy {policy_id} (entity/event, 365 days)")]


def test_lists_hide_what_a_policy_has_made_due_before_the_run(world: ServiceWorld) -> None:
    now = utcnow()
    due = put(world, "user", "u1", "old", memory_type="fact")
    put(world, "user", "u1", "new", memory_type="fact")
    backdate(world, [due.id], now - timedelta(days=100))
    old_event = event(world, now - timedelta(days=100))
    event(world, now - timedelta(days=1))

    def listed() -> tuple[set[str | None], int]:
        with world.runtime.sessions() as session:
            rows, _ = memories_read.list_pointers(
                session, world.actor, scope="user", scope_ref="u1", user_id=None,
                memory_type=None, sync_status=None, cursor=None, limit=100)
            found, _ = events_service.list_events(
                session, world.actor, scope="entity", scope_ref="ent_acme", kind=None,
                since=None, until=None, include_compressed=True, cursor=None, limit=100)
        return {r.key for r in rows}, len(found)

    assert listed() == ({"old", "new"}, 2)
    policy(world, scope="user", retention_days=90, auto_delete=False)
    policy(world, scope="entity", retention_days=90, auto_delete=False)
    assert listed() == ({"old", "new"}, 2)  # reported, not deleted: still listed
    policy(world, scope="user", retention_days=90, auto_delete=True)
    policy(world, scope="entity", retention_days=90, auto_delete=True)
    assert listed() == ({"new"}, 1)
    assert old_event.id in {e.id for e in event_rows(world)}  # hidden, not yet deleted


def test_archive_after_days_moves_older_objects_to_the_colder_class_once(
        world: ServiceWorld) -> None:
    clock = ManualWallClock(datetime.now(UTC))
    policy(world, scope="user", retention_days=90, archive_after_days=30, auto_delete=True)
    put(world, "user", "u1", "a")
    put(world, "user", "u1", "b")
    clock.advance(20 * 86400)
    put_late = put(world, "user", "u1", "c")
    backdate(world, [put_late.id], clock())
    clock.advance(20 * 86400)  # a and b are 40 days old, c 20
    result = run(world, clock())["policies"][0]
    assert (result["deleted"], result["archived"], result["archive_failed"]) == (0, 2, 0)
    found = pointers(world)
    # the local bucket records the class it was asked for
    assert {k: p.storage_class is not None for k, p in found.items()} == {
        "a": True, "b": True, "c": False}
    assert run(world, clock())["policies"][0]["archived"] == 0


def test_an_agents_user_memory_retention_deletes_its_old_user_memories_only(
        world: ServiceWorld) -> None:
    """The seed's ``agents.update({memory: {userMemory: {retention: '90d'}}})``: the run
    deletes that agent's user memories (scope ``user``, or written with a data subject) once
    they are older, and nothing of other agents or without a subject."""
    from control_plane.db.models import AgentSettings

    clock = ManualWallClock()
    with world.runtime.sessions() as session:
        session.add(AgentSettings(tenant_id=world.tenant_id, agent_id="bot",
                                  user_memory_enabled=True, user_memory_retention_days=90))
        session.commit()
    due = [put(world, "user", "u1", "pref", agent_id="bot"),
           put(world, "conversation", "c1", "note", agent_id="bot", user_id="u1")]
    other_agent = put(world, "user", "u1", "other", agent_id="helper")
    no_subject = put(world, "team", "t1", "plan", agent_id="bot")

    clock.advance(91 * 86400)
    planned = run(world, clock(), dry_run=True)
    assert planned["agents"] == [{"agent_id": "bot", "retention_days": 90, "due": 2,
                                  "deleted": 0, "held": 0}]
    assert len(pointers(world)) == 4

    done = run(world, clock())
    assert (done["deleted"], done["agents"][0]["deleted"]) == (2, 2)
    assert set(pointers(world)) == {"other", "plan"}
    assert objects(world, "memories") == {other_agent.storage_path, no_subject.storage_path}
    rows = deletes(world)
    assert sorted(r.pointer_id for r in rows) == sorted(p.id for p in due)  # type: ignore[type-var]
    assert {r.detail for r in rows} == {"agent user-memory retention (90 days)"}
