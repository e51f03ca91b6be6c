"""The cached active storage configuration after a tenant changes its bucket, on SQLite and
PostgreSQL: a request whose transaction began before the change (SQLite reads the whole
transaction from one snapshot) looks the configuration up after the change's forget; the
old bucket must not be cached as the active one, or every later write of the tenant in this
process goes to the bucket it left (the first bucket of the backend-change test in
tests/e2e/test_backends.py then keeps what the second should hold)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from control_plane.db.base import utcnow
from control_plane.db.engine import begin_write
from control_plane.db.models import StorageConfig
from control_plane.storage_config import repository as repo
from tests.support.service import ServiceWorld


def test_a_lookup_in_a_transaction_older_than_the_change_caches_the_new_bucket(
        world: ServiceWorld, tmp_path: Path) -> None:
    plane = world.runtime.plane
    with world.runtime.sessions() as session:
        before = plane.active(session, world.tenant_id).config_id
    with world.runtime.sessions() as request, world.runtime.sessions() as change:
        request.execute(select(StorageConfig.id).limit(1)).all()  # its transaction began
        config = StorageConfig(tenant_id=world.tenant_id, storage_type="local",
                               connection_config={"root": str(tmp_path / "bucket")},
                               prefix="mp", created_at=utcnow())
        begin_write(change)
        repo.replace_active(change, world.tenant_id, config)
        change.commit()
        plane.forget_tenant(world.tenant_id)  # what configure does once committed
        plane.active(request, world.tenant_id)  # after the forget, in the old transaction
        request.commit()
    with world.runtime.sessions() as session:
        after = plane.active(session, world.tenant_id).config_id
    assert before != config.id
    assert after == config.id
