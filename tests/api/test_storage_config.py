"""Bring your own bucket: PUT/GET /v1/storage/config and GET /v1/storage/health.

Credentials are probed before anything is saved, stored only encrypted, and never shown
again; a change inserts a new row, and each tenant's objects stay under its own prefix.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text

import memplane
from control_plane.db.models import StorageConfig
from tests.api.test_no_content_in_control_plane import _database_text
from tests.support.emulators import AZURITE_ACCOUNT, Azurite, MotoServer, closed_port, unique_name
from tests.support.service import Stack, Tenant

S3_FIELDS = "access_key_id, bucket, endpoint_url, prefix, region, role_arn, " \
            "secret_access_key, session_token"


def _put(tenant: Tenant, body: dict[str, Any], key: str | None = None) -> Any:
    with tenant.stack.http(key or tenant.admin_key) as http:
        return http.put("/v1/storage/config", json=body)


def _configs(tenant: Tenant) -> list[StorageConfig]:
    from sqlalchemy.orm import Session

    with Session(tenant.stack.engine) as session:
        return list(session.scalars(
            select(StorageConfig).where(StorageConfig.tenant_id == tenant.id)
            .order_by(StorageConfig.created_at)))


def test_secrets_are_stored_encrypted_and_never_shown(tenant: Tenant,
                                                      s3_config: dict[str, Any]) -> None:
    secret = f"SECRET-{uuid.uuid4().hex}"
    token = f"TOKEN-{uuid.uuid4().hex}"
    body = {"storage_type": "s3",
            "connection_config": {**s3_config, "secret_access_key": secret,
                                  "session_token": token, "prefix": "acme/agents"}}
    put = _put(tenant, body)
    assert put.status_code == 200, put.text
    answer = put.json()
    assert answer["storage_type"] == "s3"
    assert answer["bucket"] == s3_config["bucket"]
    assert answer["prefix"] == f"acme/agents/{tenant.id}"
    assert answer["region"] == "us-east-1"
    assert answer["endpoint"] == s3_config["endpoint_url"]
    assert answer["connection_config"] == {
        "bucket": s3_config["bucket"], "region": "us-east-1",
        "endpoint_url": s3_config["endpoint_url"], "access_key_id": "testing",
        "prefix": "acme/agents"}
    assert answer["secrets_set"] == ["secret_access_key", "session_token"]
    assert (answer["versioning"], answer["object_lock"], answer["is_active"]) == (
        False, False, True)

    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="u1", key="k", value="stored in s3")
        assert client.memory.get(scope="user", scope_ref="u1", key="k").value == "stored in s3"
    with tenant.stack.http(tenant.admin_key) as http:
        texts = [put.text, http.get("/v1/storage/config").text,
                 http.get("/v1/storage/health").text,
                 http.get("/v1/audit", params={"limit": 1000}).text]
    assert all(secret not in t and token not in t for t in texts)
    assert secret not in _database_text(tenant) and token not in _database_text(tenant)
    [_, row] = _configs(tenant)
    assert row.credentials_encrypted is not None
    assert secret.encode() not in row.credentials_encrypted


def test_unknown_field_is_refused_and_nothing_is_saved(tenant: Tenant,
                                                       s3_config: dict[str, Any]) -> None:
    answer = _put(tenant, {"storage_type": "s3",
                           "connection_config": {**s3_config, "bucket_name": "x"}})
    assert answer.status_code == 422
    assert answer.json()["detail"] == (
        "body.s3.connection_config: Value error, s3 connection_config does not accept "
        f"'bucket_name'; the fields it accepts are: {S3_FIELDS}")
    assert [c.storage_type for c in _configs(tenant)] == ["default"]


@pytest.mark.parametrize(("body", "expected"), [
    ({"storage_type": "ftp", "connection_config": {}},
     "body: Input tag 'ftp' found using 'storage_type' does not match any of the expected "
     "tags: 's3', 'gcs', 'azure', 'local'"),
    ({"storage_type": "s3", "connection_config": {"region": "eu-west-1"}},
     "body.s3.connection_config.bucket: this field is required"),
    ({"storage_type": "s3", "connection_config": {"bucket": "bkt", "access_key_id": "k"}},
     "body.s3.connection_config: Value error, give access_key_id and secret_access_key "
     "together"),
    ({"storage_type": "azure", "connection_config": {"container": "ctr"}},
     "body.azure.connection_config: Value error, give connection_string, or account_url "
     "with exactly one of account_key and sas_token"),
    ({"storage_type": "local", "connection_config": {"root": "relative/dir"}},
     "body.local.connection_config.root: Value error, root must be an absolute directory "
     "path on the server"),
    ({"storage_type": "gcs", "connection_config": {"bucket": "bkt", "credentials_info": "{"}},
     "body.gcs.connection_config.credentials_info: Value error, credentials_info must be the "
     "service account key as a JSON object (or its JSON text)"),
    ({"storage_type": "gcs", "connection_config": {"bucket": "»\u0006", "anonymous": True}},
     "body.gcs.connection_config.bucket: Value error, a GCS bucket name is 3-222 lowercase "
     "letters, digits, dots, dashes or underscores, starting and ending with a letter or digit"),
], ids=["unknown-type", "missing-bucket-field", "half-a-key", "azure-no-credentials",
        "relative-root", "gcs-bad-json", "gcs-bad-bucket-name"])
def test_bad_input_is_a_422_sentence(tenant: Tenant, body: dict[str, Any],
                                     expected: str) -> None:
    answer = _put(tenant, body)
    assert answer.status_code == 422
    assert answer.json()["detail"] == expected


def test_bad_credentials_are_refused_before_saving(tenant: Tenant,
                                                   moto_auth_server: MotoServer) -> None:
    secret = f"not-the-secret-{uuid.uuid4().hex}"
    config = moto_auth_server.config("any-bucket") | {
        "access_key_id": "AKIANOTAREALKEY", "secret_access_key": secret}
    answer = _put(tenant, {"storage_type": "s3", "connection_config": config})
    assert answer.status_code == 422
    body = answer.json()
    assert body["problem"] == "auth_failed"
    assert body["detail"] == ("the bucket rejected the credentials (auth_failed); nothing was "
                              "saved — fix the connection_config and retry")
    assert secret not in answer.text
    assert [c.storage_type for c in _configs(tenant)] == ["default"]
    with tenant.client() as client:
        failures = client.audit.list(operation="storage_configure").items
    assert [(e.success, e.detail.startswith("storage_type=s3 validation_error: the bucket "
                                            "rejected the credentials")) for e in failures] == [
        (False, True)]
    assert secret not in failures[0].detail


def test_azure_bad_account_key_is_named(tenant: Tenant, azurite_server: Azurite) -> None:
    container = unique_name("az")
    azurite_server.create_bucket(container)
    answer = _put(tenant, {"storage_type": "azure", "connection_config": {
        "container": container, "account_url": azurite_server.account_url,
        "account_key": "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXk="}})
    assert answer.status_code == 422
    assert answer.json()["problem"] == "auth_failed"


def test_missing_bucket_and_unreachable_endpoint_are_named(
        tenant: Tenant, s3_config: dict[str, Any]) -> None:
    missing = _put(tenant, {"storage_type": "s3", "connection_config": {
        **s3_config, "bucket": "no-such-bucket-here"}})
    assert missing.status_code == 422
    assert missing.json()["problem"] == "bucket_not_found"
    assert missing.json()["detail"] == (
        "the bucket or container does not exist (bucket_not_found); nothing was saved — fix "
        "the connection_config and retry")

    unreachable = _put(tenant, {"storage_type": "s3", "connection_config": {
        **s3_config, "endpoint_url": f"http://127.0.0.1:{closed_port()}"}})
    assert unreachable.status_code == 422
    assert unreachable.json()["problem"] == "unreachable"
    assert unreachable.json()["detail"] == (
        "the storage endpoint could not be reached, or did not answer as a bucket "
        "(unreachable); nothing was saved — fix the connection_config and retry")
    assert [c.storage_type for c in _configs(tenant)] == ["default"]


def test_a_change_inserts_a_new_row_and_retires_the_old(tenant: Tenant, tmp_path: Path,
                                                        s3_config: dict[str, Any]) -> None:
    with tenant.client() as client:
        first = client.storage.configure(storage_type="s3", connection_config=s3_config)
        second = client.storage.configure(storage_type="local",
                                          connection_config={"root": str(tmp_path / "b")})
        assert client.storage.get_config().id == second.id
        assert second.connection_config == {"root": str(tmp_path / "b")}
        assert second.secrets_set == []
    rows = _configs(tenant)
    assert [(str(r.id), r.storage_type, r.is_active) for r in rows[1:]] == [
        (first.id, "s3", False), (second.id, "local", True)]
    assert rows[0].storage_type == "default" and rows[0].is_active is False
    with tenant.client() as client:
        operations = [(e.operation, e.success) for e in client.audit.list(limit=1000).items
                      if e.operation.startswith("storage_")]
    assert operations == [("storage_configure", True), ("storage_configure", True),
                          ("storage_config_read", True)]


def test_two_tenants_in_one_bucket_never_share_objects(stack: Any,
                                                       s3_config: dict[str, Any],
                                                       moto_server: MotoServer) -> None:
    a, b = stack.new_tenant(), stack.new_tenant()
    paths = {}
    for tenant in (a, b):
        with tenant.client() as client:
            config = client.storage.configure(storage_type="s3", connection_config=s3_config)
            pointer = client.memory.set(scope="user", scope_ref="u1", key="same", value=str(
                tenant.id))
            paths[tenant.id] = f"{config.prefix}/{pointer.storage_path}"
            assert config.prefix == f"memplane/{tenant.id}"
    raw = moto_server.client()
    listed = sorted(o["Key"] for o in raw.list_objects_v2(
        Bucket=s3_config["bucket"]).get("Contents", []))
    raw.close()
    # Each tenant's objects sit under its own prefix; besides the two memories, the only
    # objects are the signed audit checkpoints the sealer may have written meanwhile, each
    # under its own tenant's prefix too.
    assert [k for k in listed if "/memories/" in k] == sorted(paths.values())
    prefixes = tuple(f"memplane/{t.id}/" for t in (a, b))
    assert all(k.startswith(prefixes) for k in listed)
    assert [k for k in listed if "/memories/" not in k] == [
        k for k in listed if "/audit/checkpoints/" in k]
    with a.client() as client:
        assert client.memory.get(scope="user", scope_ref="u1", key="same").value == str(a.id)
        assert client.memory.clear(scope="user", scope_ref="u1") == 1
    with b.client() as client:
        assert client.memory.get(scope="user", scope_ref="u1", key="same").value == str(b.id)


def test_health_reports_the_bucket(tenant: Tenant, versioned_s3_config: dict[str, Any]) -> None:
    with tenant.client() as client:
        default = client.storage.health_check()
        assert (default.ok, default.storage_type, default.prefix) == (
            True, "default", f"tenants/{tenant.id}")
        config = client.storage.configure(storage_type="s3",
                                          connection_config=versioned_s3_config)
        assert (config.versioning, config.region) == (True, "us-east-1")
        health = client.storage.health_check()
    assert (health.ok, health.reachable, health.config_id, health.storage_type) == (
        True, True, config.id, "s3")
    assert (health.region, health.versioning, health.object_lock, health.soft_delete_days) == (
        "us-east-1", True, False, None)
    assert health.probe == "write, read and delete succeeded"
    assert health.latency_ms > 0
    assert health.bucket == versioned_s3_config["bucket"]


def test_roles(tenant: Tenant, s3_config: dict[str, Any]) -> None:
    body = {"storage_type": "s3", "connection_config": s3_config}
    with tenant.stack.client(tenant.key("agent")) as agent:
        with pytest.raises(memplane.Forbidden):
            agent.storage.get_config()
        with pytest.raises(memplane.Forbidden):
            agent.storage.configure(**body)
        with pytest.raises(memplane.Forbidden):
            agent.storage.health_check()
    with tenant.stack.client(tenant.key("compliance")) as officer:
        assert officer.storage.get_config().storage_type == "default"
        with pytest.raises(memplane.Forbidden) as denied:
            officer.storage.configure(**body)
        with pytest.raises(memplane.Forbidden):
            officer.storage.health_check()
    assert "use a key with role admin" in denied.value.detail
    assert [c.storage_type for c in _configs(tenant)] == ["default"]


def test_local_needs_the_servers_permission(world: Any, tmp_path: Path) -> None:
    from control_plane.errors import InvalidInput
    from control_plane.storage_config import service
    from control_plane.storage_config.schemas import LocalConfigIn

    body = LocalConfigIn.model_validate(
        {"storage_type": "local", "connection_config": {"root": str(tmp_path)}})
    with world.runtime.sessions() as session, pytest.raises(InvalidInput) as refused:
        service.configure(session, world.runtime.plane, world.actor, body, allow_local=False,
                          local_roots=[tmp_path])
    assert refused.value.detail.startswith("storage_type 'local' is not allowed on this server")
    with world.runtime.sessions() as session:
        saved = service.configure(session, world.runtime.plane, world.actor, body,
                                  allow_local=True, local_roots=[tmp_path])
    assert saved.prefix == f"memplane/{world.tenant_id}"
    assert (tmp_path / "memplane" / str(world.tenant_id)).is_dir()


def test_other_replicas_follow_a_change_at_the_ttl(world: Any, tmp_path: Path) -> None:
    from control_plane.host_board import Board
    from control_plane.plane.data_plane import DataPlane
    from control_plane.storage_config import service
    from control_plane.storage_config.schemas import LocalConfigIn
    from tests.support.clock import ManualClock

    runtime = world.runtime
    clock = ManualClock()  # the replica's cache reads this clock, so the test moves time
    replica = DataPlane(runtime.settings.resolved_bucket_url,
                        credentials=runtime.plane.credentials, active_ttl_seconds=5.0,
                        clock=clock, board=Board())  # another host: a board of its own
    try:
        with runtime.sessions() as session:
            before = replica.active(session, world.tenant_id).config_id
            body = LocalConfigIn.model_validate(
                {"storage_type": "local", "connection_config": {"root": str(tmp_path)}})
            saved = service.configure(session, runtime.plane, world.actor, body,
                                      allow_local=True, local_roots=[tmp_path])
            assert saved.id != before
            # This process forgets at once; the replica still holds its cached entry.
            assert runtime.plane.active(session, world.tenant_id).config_id == saved.id
            assert replica.active(session, world.tenant_id).config_id == before
            clock.advance(4.75)
            assert replica.active(session, world.tenant_id).config_id == before
            clock.advance(0.25)
            assert replica.active(session, world.tenant_id).config_id == saved.id
    finally:
        replica.close()


def test_a_lookup_that_read_the_old_configuration_does_not_keep_it_after_a_change(
        world: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from control_plane.plane.data_plane import DataPlane
    from control_plane.storage_config import service
    from control_plane.storage_config.schemas import LocalConfigIn
    from tests.support.clock import ManualClock

    runtime = world.runtime
    plane = DataPlane(runtime.settings.resolved_bucket_url,
                      credentials=runtime.plane.credentials, active_ttl_seconds=5.0,
                      clock=ManualClock())
    try:
        with runtime.sessions() as session:
            before = runtime.plane.active(session, world.tenant_id).config_id
            body = LocalConfigIn.model_validate(
                {"storage_type": "local", "connection_config": {"root": str(tmp_path)}})
            saved = service.configure(session, runtime.plane, world.actor, body,
                                      allow_local=True, local_roots=[tmp_path])
            real = session.scalar

            def read_before_the_change(*args: Any, **kwargs: Any) -> Any:
                # A lookup whose read ran before the change committed; the change's forget
                # lands before the lookup stores what it read.
                monkeypatch.setattr(session, "scalar", real)
                plane.forget_tenant(world.tenant_id)
                return uuid.UUID(str(before))

            monkeypatch.setattr(session, "scalar", read_before_the_change)
            racing = plane.active(session, world.tenant_id).config_id
            after = plane.active(session, world.tenant_id).config_id
    finally:
        plane.close()
    assert (racing, after) == (before, saved.id)


def test_an_agent_route_read_before_a_change_is_not_kept_after_it(
        world: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from control_plane.plane.data_plane import DataPlane
    from tests.support.clock import ManualClock

    runtime = world.runtime
    plane = DataPlane(runtime.settings.resolved_bucket_url,
                      credentials=runtime.plane.credentials, active_ttl_seconds=5.0,
                      clock=ManualClock())

    class Stale:  # the agent's settings as a read before the change saw them
        def first(self) -> tuple[bool, None]:
            return (False, None)

    try:
        with runtime.sessions() as session:
            real = session.execute

            def read_before_the_change(*args: Any, **kwargs: Any) -> Any:
                monkeypatch.setattr(session, "execute", real)
                plane.forget_agent(world.tenant_id, "a1")  # the change lands meanwhile
                return Stale()

            monkeypatch.setattr(session, "execute", read_before_the_change)
            racing = plane.agent_route(session, world.tenant_id, "a1")
            after = plane.agent_route(session, world.tenant_id, "a1")
    finally:
        plane.close()
    assert racing is not None and racing.enabled is False
    assert after is None  # read again: the agent has no settings row


def test_stored_credentials_are_bound_to_their_row(tenant: Tenant,
                                                   azurite_server: Azurite) -> None:
    container = unique_name("az")
    azurite_server.create_bucket(container)
    with tenant.client() as client:
        config = client.storage.configure(storage_type="azure", connection_config={
            "container": container, "connection_string": azurite_server.connection_string})
        client.memory.set(scope="user", scope_ref="u1", key="k", value=AZURITE_ACCOUNT)
    assert config.secrets_set == ["connection_string"]
    assert config.endpoint is None and config.bucket == container
    with tenant.stack.engine.begin() as conn:
        blob = conn.execute(text("SELECT credentials_encrypted FROM storage_configs "
                                 "WHERE id = :id"), {"id": _db_id(tenant, config.id)}).scalar()
    box = tenant.stack.runtime.plane.credentials
    assert box is not None
    from control_plane.plane.credentials import CredentialsUnreadable, associated_data

    assert box.open(bytes(blob), aad=associated_data(tenant.id, uuid.UUID(config.id))) == {
        "connection_string": azurite_server.connection_string}
    with pytest.raises(CredentialsUnreadable):
        box.open(bytes(blob), aad=associated_data(tenant.id, uuid.uuid4()))


def _db_id(tenant: Tenant, config_id: str) -> Any:
    # SQLite stores UUIDs as 32 hex characters, PostgreSQL as uuid.
    if tenant.stack.engine.dialect.name == "sqlite":
        return uuid.UUID(config_id).hex
    return uuid.UUID(config_id)


def test_local_bucket_outside_the_allowed_roots_is_refused(stack: Stack) -> None:
    tenant = stack.new_tenant()
    with tenant.stack.http(tenant.admin_key) as http:
        response = http.put("/v1/storage/config", json={
            "storage_type": "local", "connection_config": {"root": "/etc/memplane-probe"}})
    assert response.status_code == 422
    assert "a local bucket must be inside one of" in response.json()["detail"]
    assert not Path("/etc/memplane-probe").exists()
