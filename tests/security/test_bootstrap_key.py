"""The bootstrap admin key (MEMPLANE_ADMIN_KEY): changing it revokes the previous one, and a
chosen key must have at least 32 characters.

Each test runs on a database of its own (SQLite file or a fresh PostgreSQL database): it
rotates the bootstrap key, which the shared test server's database must keep.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import select

from control_plane.db.models import AccessLog, ApiKey
from control_plane.errors import Unauthorized
from control_plane.identity import authenticate
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.tenants.service import ensure_bootstrap
from tests.support.service import ServerThread, isolated_database, make_settings


@pytest.fixture(params=["sqlite", "postgres"])
def own_database(request: pytest.FixtureRequest) -> str:
    return isolated_database(request.param, request)


def _key() -> str:
    return "mp_" + secrets.token_urlsafe(32)


def _statuses(server: ServerThread, key: str) -> tuple[int, int]:
    import httpx

    with httpx.Client(base_url=f"http://127.0.0.1:{server.port}",
                      headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        listed = http.get("/v1/pointers").status_code
        created = http.post("/v1/tenants", json={"name": "made-by-bootstrap"}).status_code
    return listed, created


def _run(settings: Settings, *keys: str) -> list[tuple[int, int]]:
    server = ServerThread(settings).start()
    try:
        return [_statuses(server, key) for key in keys]
    finally:
        server.stop()


def test_a_changed_admin_key_revokes_the_previous_one(own_database: str, tmp_path: Path) -> None:
    first, second = _key(), _key()
    assert _run(make_settings(own_database, tmp_path, admin_key=first), first) == [(200, 201)]
    after_change = _run(make_settings(own_database, tmp_path, admin_key=second), first, second)
    assert after_change == [(401, 401), (200, 201)]
    # Starting again with the same key changes nothing.
    assert _run(make_settings(own_database, tmp_path, admin_key=second), second) == [(200, 201)]

    runtime = Runtime(make_settings(own_database, tmp_path, admin_key=second))
    try:
        with runtime.sessions() as session:
            keys = session.execute(
                select(ApiKey.name, ApiKey.revoked_at.is_not(None))
                .where(ApiKey.can_create_tenants.is_(True)).order_by(ApiKey.created_at)).all()
            revocations = session.execute(
                select(AccessLog.accessor_type, AccessLog.accessor_id, AccessLog.detail)
                .where(AccessLog.operation == "key_revoke")).all()
            first_id = session.scalar(select(ApiKey.id).where(ApiKey.can_create_tenants.is_(True))
                                      .order_by(ApiKey.created_at).limit(1))
            # Going back to the revoked key is refused with a sentence, not silently accepted.
            with pytest.raises(RuntimeError) as refused:
                ensure_bootstrap(session, first)
    finally:
        runtime.close()
    assert [tuple(k) for k in keys] == [("initial admin key", True),
                                        ("bootstrap admin key (MEMPLANE_ADMIN_KEY)", False)]
    assert [tuple(r) for r in revocations] == [
        ("system", "bootstrap", f"key {first_id} replaced by a new MEMPLANE_ADMIN_KEY")]
    assert str(refused.value) == ("MEMPLANE_ADMIN_KEY is a key that was revoked; choose a new "
                                  "random key of at least 32 characters")


def test_setting_an_admin_key_revokes_the_generated_one(own_database: str,
                                                        tmp_path: Path) -> None:
    chosen = _key()
    runtime = Runtime(make_settings(own_database, tmp_path, admin_key=None))
    if own_database == "sqlite":
        runtime.migrate()
    try:
        with runtime.sessions() as session:
            generated = ensure_bootstrap(session, None)
            assert generated is not None
            assert authenticate(session, f"Bearer {generated}").can_create_tenants is True
            session.rollback()
            assert ensure_bootstrap(session, chosen) is None
            with pytest.raises(Unauthorized):
                authenticate(session, f"Bearer {generated}")
            assert authenticate(session, f"Bearer {chosen}").can_create_tenants is True
    finally:
        runtime.close()


@pytest.mark.parametrize("length", [1, 16, 31])
def test_a_short_admin_key_is_refused_at_startup(tmp_path: Path, length: int) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(data_dir=tmp_path, admin_key="k" * length)
    assert ("MEMPLANE_ADMIN_KEY must be a random secret of at least 32 characters"
            in str(refused.value))


def test_a_short_admin_key_from_the_environment_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPLANE_ADMIN_KEY", "mp_local_dev_key")
    with pytest.raises(ValidationError) as refused:
        Settings(data_dir=tmp_path)
    assert "at least 32 characters" in str(refused.value)
    monkeypatch.setenv("MEMPLANE_ADMIN_KEY", "k" * 32)
    assert Settings(data_dir=tmp_path).admin_key is not None
