"""Valid API keys are trusted for a few seconds without a lookup; revocation still bites.

The cache reads an injected clock, so the test moves time instead of sleeping through the TTL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import update

from control_plane.db.base import utcnow
from control_plane.db.models import ApiKey
from control_plane.errors import Unauthorized
from control_plane.identity import CALLERS, Caller, authenticate
from control_plane.tenants import service as tenants
from tests.support.clock import ManualClock
from tests.support.service import ServiceWorld

TTL = 5.0


@pytest.fixture
def clock() -> Iterator[ManualClock]:
    before = CALLERS.ttl, CALLERS.clock
    manual = ManualClock()
    CALLERS.ttl, CALLERS.clock = TTL, manual
    yield manual
    CALLERS.ttl, CALLERS.clock = before


def _admin(world: ServiceWorld) -> tuple[Caller, str]:
    with world.runtime.sessions() as session:
        bootstrap = Caller(world.tenant_id, world.tenant_id, "admin", False)
        key, raw = tenants.create_api_key(session, bootstrap, "agent", "cached")
        return authenticate(session, f"Bearer {raw}"), raw


def _revoke_in_the_database(world: ServiceWorld, caller: Caller) -> None:
    with world.runtime.sessions() as session:  # what another replica does: only the database
        session.execute(update(ApiKey).where(ApiKey.id == caller.key_id)
                        .values(revoked_at=utcnow()))
        session.commit()


def test_key_revoked_on_another_replica_stops_working_at_the_ttl(
        world: ServiceWorld, clock: ManualClock) -> None:
    caller, raw = _admin(world)  # validated and cached at clock time 0
    _revoke_in_the_database(world, caller)
    with world.runtime.sessions() as session:
        assert authenticate(session, f"Bearer {raw}") == caller  # still trusted
        clock.advance(TTL - 0.25)
        assert authenticate(session, f"Bearer {raw}") == caller  # a cache hit
        clock.advance(0.25)  # exactly TTL after the lookup: looked up again, and refused
        with pytest.raises(Unauthorized) as refused:
            authenticate(session, f"Bearer {raw}")
    assert refused.value.detail == ("the API key is not valid; check it or ask an admin for a "
                                    "new one")


def test_a_cache_hit_does_not_extend_the_ttl(world: ServiceWorld, clock: ManualClock) -> None:
    caller, raw = _admin(world)
    with world.runtime.sessions() as session:
        for _ in range(4):  # hits a second apart: the entry still dies TTL after its lookup
            clock.advance(1.0)
            assert authenticate(session, f"Bearer {raw}") == caller
    _revoke_in_the_database(world, caller)
    clock.advance(1.0)
    with world.runtime.sessions() as session, pytest.raises(Unauthorized):
        authenticate(session, f"Bearer {raw}")


def test_a_zero_ttl_caches_nothing(world: ServiceWorld, clock: ManualClock) -> None:
    CALLERS.ttl = 0
    caller, raw = _admin(world)
    _revoke_in_the_database(world, caller)
    with world.runtime.sessions() as session, pytest.raises(Unauthorized):
        authenticate(session, f"Bearer {raw}")  # same clock time: still looked up


def test_key_revoked_through_this_process_stops_working_at_once(
        world: ServiceWorld, clock: ManualClock) -> None:
    caller, raw = _admin(world)
    bootstrap = Caller(world.tenant_id, world.tenant_id, "admin", False)
    with world.runtime.sessions() as session:
        tenants.revoke_api_key(session, bootstrap, caller.key_id)
        with pytest.raises(Unauthorized):
            authenticate(session, f"Bearer {raw}")  # no clock movement at all
