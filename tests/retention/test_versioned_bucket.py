"""On a versioned S3 bucket (moto), a retention run removes every version and delete marker
of what it deletes — memories, their superseded copies and event bodies — so listing the
versions under the tenant's prefixes finds only what was kept."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from control_plane.storage_config import service as storage
from control_plane.storage_config.schemas import S3ConfigIn
from tests.retention.helpers import deletes, event, objects, pointers, policy, put, run
from tests.support.clock import ManualWallClock
from tests.support.service import ServiceWorld


def test_every_version_of_a_deleted_item_is_gone(world: ServiceWorld,
                                                  versioned_s3_config: dict[str, Any]) -> None:
    with world.runtime.sessions() as session:
        saved = storage.configure(
            session, world.runtime.plane, world.actor,
            S3ConfigIn.model_validate({"storage_type": "s3",
                                       "connection_config": versioned_s3_config}),
            allow_local=False, local_roots=[Path("/nonexistent")])
    assert saved.versioning is True
    clock = ManualWallClock()
    policy(world, scope="user", retention_days=30, auto_delete=True)
    policy(world, scope="entity", memory_type="event", retention_days=30, auto_delete=True)
    for n in range(3):
        put(world, "user", "u1", "rewritten", value=n)  # three writes of one key
    put(world, "user", "u1", "other")
    kept = put(world, "agent", "bot", "kept")
    old_event = event(world, clock() - timedelta(days=40))
    assert len(objects(world, "memories")) >= 3
    assert old_event.storage_path in objects(world, "events")

    clock.advance(31 * 86400)
    result = run(world, clock())

    assert result["deleted"] == 3  # two memories and one event
    assert set(pointers(world)) == {"kept"}
    assert objects(world, "memories") == {kept.storage_path}
    assert objects(world, "events") == set()
    assert len(deletes(world)) == 3
