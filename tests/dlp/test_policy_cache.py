"""The cached DLP policy after a tenant changes it, on SQLite and PostgreSQL: a write whose
transaction began before the change (SQLite reads the whole transaction from one snapshot)
looks the policy up after the change's forget; the old policy must not be cached, or the
tenant's writes in this process would be screened by it until the cache expires."""

from __future__ import annotations

from sqlalchemy import select

from control_plane.db.models import DlpPolicy
from control_plane.dlp import policy
from control_plane.identity import Actor
from tests.support.service import ServiceWorld


def test_a_lookup_in_a_transaction_older_than_the_change_caches_the_new_policy(
        world: ServiceWorld) -> None:
    admin = Actor(world.tenant_id, "api", "key:test")
    with world.runtime.sessions() as session:
        policy.write_policy(session, admin, "flag", None)
        assert policy.policy_of(session, world.tenant_id).mode == "flag"
    with world.runtime.sessions() as request, world.runtime.sessions() as change:
        request.execute(select(DlpPolicy.tenant_id).limit(1)).all()  # its transaction began
        policy.write_policy(change, admin, "refuse", None)  # commits, then forgets
        seen = policy.policy_of(request, world.tenant_id).mode  # after the forget
        request.commit()
    with world.runtime.sessions() as session:
        after = policy.policy_of(session, world.tenant_id).mode
    assert (seen, after) == ("refuse", "refuse")
