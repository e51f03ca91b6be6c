"""The SDK's retention, cleanup and legal-hold calls against the live server (SQLite and
PostgreSQL), including the seed's ``cleanup(agent_id, older_than='180d', exclude_keys)``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

import memplane
from control_plane.db.base import utcnow
from control_plane.db.models import MemoryPointer
from memplane._hygiene import parse_days
from tests.support.service import Tenant


def _age(tenant: Tenant, days: int) -> None:
    with tenant.stack.engine.begin() as conn:
        conn.execute(update(MemoryPointer).where(MemoryPointer.tenant_id == tenant.id)
                     .values(updated_at=utcnow() - timedelta(days=days)))


def test_the_seed_cleanup_call(client: memplane.Client, tenant: Tenant) -> None:
    client.memory.set(scope="agent", scope_ref="bot", key="history", value=[1],
                      agent_id="bot")
    client.memory.set(scope="agent", scope_ref="bot", key="preferences", value={"a": 1},
                      agent_id="bot")
    client.memory.set(scope="agent", scope_ref="other", key="history", value=[2],
                      agent_id="other")
    _age(tenant, 200)
    plan = client.memory.cleanup(agent_id="bot", older_than="180d",
                                 exclude_keys=["preferences"], dry_run=True)
    assert isinstance(plan, memplane.CleanupResult)
    assert (plan.matched, plan.deleted, plan.excluded, plan.held) == (1, 0, 1, 0)
    assert plan.items is not None and [i.key for i in plan.items] == ["history"]
    done = client.memory.cleanup(agent_id="bot", older_than_days=180,
                                 exclude_keys=["preferences"])
    assert isinstance(done, memplane.CleanupResult) and done.deleted == 1
    with pytest.raises(memplane.NotFound):
        client.memory.get(scope="agent", scope_ref="bot", key="history")
    assert client.memory.get(scope="agent", scope_ref="other", key="history").value == [2]
    with pytest.raises(ValueError, match="older_than"):
        client.memory.cleanup(older_than="six months")
    with pytest.raises(ValueError, match="not both"):
        client.memory.cleanup(older_than="1d", older_than_days=1)


def test_parse_days() -> None:
    assert [parse_days(v) for v in (180, "180", "180d", " 26w", "1y")] == [
        180, 180, 180, 182, 365]


def test_policies_runs_and_holds(client: memplane.Client) -> None:
    policy = client.memory.set_retention_policy(
        scope="user", memory_type="conversation_history", retention_days=90,
        archive_after_days=30, auto_delete=True)
    assert (policy.scope, policy.memory_type, policy.retention_days) == (
        "user", "conversation_history", 90)
    assert [p.id for p in client.retention.list_policies()] == [policy.id]
    job = client.retention.run(dry_run=True)
    finished = client.jobs.wait(job.id, timeout=120)
    assert finished.state == "completed"
    assert finished.result is not None and finished.result["dry_run"] is True
    client.retention.delete_policy(policy.id)
    assert client.retention.list_policies() == []

    client.memory.set(scope="user", scope_ref="u-9", key="k", value=1)
    hold = client.legal_holds.place(user_id="u-9", reason="litigation",
                                    idempotency_key="hold-u-9")
    assert (hold.active, hold.target, hold.user_id) == (True, "subject", "u-9")
    with pytest.raises(memplane.Conflict) as refused:
        client.memory.delete(scope="user", scope_ref="u-9", key="k")
    assert hold.id in str(refused.value)
    assert [h.id for h in client.legal_holds.list()] == [hold.id]
    lifted = client.legal_holds.lift(hold.id)
    assert (lifted.active, lifted.user_id) == (False, None)
    client.memory.delete(scope="user", scope_ref="u-9", key="k")
