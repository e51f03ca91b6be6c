"""Valid API keys are trusted for a few seconds without a lookup; revocation still bites."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import update

from control_plane.db.base import utcnow
from control_plane.db.models import ApiKey
from control_plane.errors import Unauthorized
from control_plane.tenants import service as tenants
from tests.support.service import ServiceWorld


@pytest.fixture
def short_ttl() -> object:
    before = tenants.CALLERS.ttl
    tenants.CALLERS.ttl = 0.3
    yield
    tenants.CALLERS.ttl = before


def _admin(world: ServiceWorld) -> tuple[tenants.Caller, str]:
    with world.runtime.sessions() as session:
        bootstrap = tenants.Caller(world.tenant_id, world.tenant_id, "admin", False)
        key, raw = tenants.create_api_key(session, bootstrap, "agent", "cached")
        return tenants.authenticate(session, f"Bearer {raw}"), raw


def test_key_revoked_on_another_replica_stops_working_after_the_ttl(
        world: ServiceWorld, short_ttl: object) -> None:
    caller, raw = _admin(world)
    with world.runtime.sessions() as session:  # what another replica does: only the database
        session.execute(update(ApiKey).where(ApiKey.id == caller.key_id)
                        .values(revoked_at=utcnow()))
        session.commit()
        assert tenants.authenticate(session, f"Bearer {raw}") == caller  # still trusted
        time.sleep(0.4)
        with pytest.raises(Unauthorized):
            tenants.authenticate(session, f"Bearer {raw}")


def test_key_revoked_through_this_process_stops_working_at_once(
        world: ServiceWorld, short_ttl: object) -> None:
    caller, raw = _admin(world)
    bootstrap = tenants.Caller(world.tenant_id, world.tenant_id, "admin", False)
    with world.runtime.sessions() as session:
        tenants.revoke_api_key(session, bootstrap, caller.key_id)
        with pytest.raises(Unauthorized):
            tenants.authenticate(session, f"Bearer {raw}")
