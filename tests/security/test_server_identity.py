"""The server's own cloud identity never meets an endpoint a tenant chose, and impersonation is
bound to the tenant.

A GCS ``impersonate_service_account`` has the server's Google identity mint a token that then
goes with every bucket request; an S3 ``role_arn`` has the server's AWS identity assume a role
whose session credentials then sign every request. With a custom endpoint either would be
handed to whoever listens there, so the pair is refused: by the schema (422), and again when a
stored configuration's adapter is built. Which Google accounts a tenant may have impersonated
is the operator's list (MEMPLANE_GCS_IMPERSONATION_ALLOWED); without an entry, none.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.security.http_servers import Recorder
from tests.support.emulators import MotoServer, unique_name
from tests.support.service import Tenant

ROLE_ARN = "arn:aws:iam::123456789012:role/memplane-tenant"
SERVER_KEY_ID = "AKIASERVEROWNIDENTITY"
VICTIM_ACCOUNT = "memplane@victim-project.iam.gserviceaccount.com"
GCS_ENDPOINT_RULE = (
    "impersonate_service_account works only with Google's own endpoint: leave out endpoint "
    "(a token this server mints for the account would otherwise be sent to that endpoint), "
    "or use credentials_info, a key of your own")
S3_ENDPOINT_RULE = (
    "role_arn works only with AWS's own endpoint: leave out endpoint_url (the session "
    "credentials of the role this server assumes would otherwise be sent to that endpoint), "
    "or use access_key_id and secret_access_key, keys of your own")


def _bound_rule(account: str) -> str:
    return (f"this server may not impersonate {account!r} for your tenant: the operator lists "
            "the service accounts each tenant may impersonate in "
            "MEMPLANE_GCS_IMPERSONATION_ALLOWED; ask the operator to add this one for your "
            "tenant id, or use credentials_info, a key of your own")


def _put(tenant: Tenant, body: dict[str, Any]) -> Any:
    with tenant.stack.http(tenant.admin_key) as http:
        return http.put("/v1/storage/config", json=body)


def _configure_audits(tenant: Tenant) -> list[Any]:
    with tenant.stack.http(tenant.admin_key) as http:
        entries = http.get("/v1/audit", params={"limit": 1000}).json()["items"]
    return [e for e in entries if e["operation"] == "storage_configure"]


@pytest.fixture
def google_identity(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[None]:
    """The server's own Google identity, as google.auth.default finds it on a host."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    key_file = tmp_path / "server-sa.json"
    key_file.write_text(json.dumps({
        "type": "service_account", "project_id": "p", "private_key_id": "k1",
        "private_key": pem, "client_email": "server-own@p.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": "https://oauth2.googleapis.com/token"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    yield


@pytest.fixture
def aws_identity(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[None]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", SERVER_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "server-own-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    yield


# -- the server's identity and a tenant's endpoint ----------------------------------------

def test_gcs_impersonation_with_a_custom_endpoint_is_refused(
        tenant: Tenant, google_identity: None) -> None:
    with Recorder() as listener:
        answer = _put(tenant, {"storage_type": "gcs", "connection_config": {
            "bucket": "bkt", "endpoint": listener.url,
            "impersonate_service_account": VICTIM_ACCOUNT}})
        assert listener.hits == []
    assert answer.status_code == 422
    assert answer.json()["detail"] == (
        f"body.gcs.connection_config: Value error, {GCS_ENDPOINT_RULE}")
    assert _configure_audits(tenant) == []


def test_s3_role_with_a_custom_endpoint_is_refused(
        tenant: Tenant, moto_server: MotoServer, aws_identity: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The role can be assumed (STS is moto here), so without the rule its session token
    would reach the tenant's listener, which forwards to a real bucket and answers 200."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", moto_server.endpoint)
    bucket = unique_name("s3")
    moto_server.create_bucket(bucket)
    with Recorder(forward_to=moto_server.endpoint) as listener:
        answer = _put(tenant, {"storage_type": "s3", "connection_config": {
            "bucket": bucket, "region": "us-east-1", "endpoint_url": listener.url,
            "role_arn": ROLE_ARN}})
        assert listener.hits == []
    assert answer.status_code == 422
    assert answer.json()["detail"] == (
        f"body.s3.connection_config: Value error, {S3_ENDPOINT_RULE}")


def test_the_adapter_factory_refuses_it_too() -> None:
    from storage_adapters.identity import IdentityRefused
    from storage_adapters.netguard import EndpointPolicy
    from storage_adapters.registry import from_config

    policy = EndpointPolicy.from_entries(["127.0.0.1/32"])
    with pytest.raises(IdentityRefused) as gcs:
        from_config("gcs", {"bucket": "bkt", "endpoint": "http://127.0.0.1:9",
                            "impersonate_service_account": VICTIM_ACCOUNT},
                    endpoint_policy=policy)
    assert str(gcs.value) == GCS_ENDPOINT_RULE
    with pytest.raises(IdentityRefused) as s3:
        from_config("s3", {"bucket": "bkt", "endpoint_url": "http://127.0.0.1:9",
                           "role_arn": ROLE_ARN, "external_id": "t"}, endpoint_policy=policy)
    assert str(s3.value) == S3_ENDPOINT_RULE


@pytest.mark.parametrize(("storage_type", "connection", "rule"), [
    ("gcs", {"bucket": "bkt", "endpoint": "http://127.0.0.1:9", "use_batch": False,
             "impersonate_service_account": "sa@tenant-proj.iam.gserviceaccount.com"},
     GCS_ENDPOINT_RULE),
    ("s3", {"bucket": "bkt", "region": "us-east-1", "endpoint_url": "http://127.0.0.1:9",
            "role_arn": ROLE_ARN}, S3_ENDPOINT_RULE),
    ("gcs", {"bucket": "bkt", "impersonate_service_account": VICTIM_ACCOUNT},
     _bound_rule(VICTIM_ACCOUNT)),
], ids=["gcs-impersonation-endpoint", "s3-role-endpoint", "gcs-unbound-account"])
def test_a_stored_configuration_that_predates_the_rules_is_not_used(
        world: Any, google_identity: None, aws_identity: None, storage_type: str,
        connection: dict[str, Any], rule: str) -> None:
    from control_plane.db.models import StorageConfig
    from control_plane.errors import StorageMisconfigured
    from control_plane.plane.data_plane import DataPlane

    config_id = uuid.uuid4()
    with world.runtime.sessions() as session:
        session.add(StorageConfig(
            id=config_id, tenant_id=world.tenant_id, storage_type=storage_type, bucket="bkt",
            prefix=f"memplane/{world.tenant_id}", connection_config=connection,
            is_active=False))
        session.commit()
    plane = DataPlane("memory://unused", credentials=world.runtime.plane.credentials,
                      allowed_endpoints=["127.0.0.1/32"], impersonation_allowed=[
                          f"{world.tenant_id}=*@tenant-proj.iam.gserviceaccount.com"])
    try:
        with world.runtime.sessions() as session, pytest.raises(StorageMisconfigured) as error:
            plane.by_id(session, config_id)
    finally:
        plane.close()
    assert error.value.detail == (
        f"the stored storage configuration is no longer accepted ({rule}); an admin must "
        "configure the storage again")
    assert error.value.extra == {"problem": "impersonation_not_allowed"}


# -- impersonation bound to the tenant -------------------------------------------------------

def test_impersonation_is_refused_for_a_tenant_the_operator_did_not_bind(
        tenant: Tenant, google_identity: None) -> None:
    answer = _put(tenant, {"storage_type": "gcs", "connection_config": {
        "bucket": "bkt", "impersonate_service_account": VICTIM_ACCOUNT}})
    assert answer.status_code == 422
    assert answer.json()["problem"] == "impersonation_not_allowed"
    assert answer.json()["detail"] == f"{_bound_rule(VICTIM_ACCOUNT)}; nothing was saved"
    [failure] = _configure_audits(tenant)
    assert failure["success"] is False


def test_only_the_bound_tenant_may_impersonate_an_account(world: Any,
                                                          google_identity: None) -> None:
    from control_plane.errors import InvalidInput
    from control_plane.identity import Actor
    from control_plane.plane.data_plane import DataPlane
    from control_plane.storage_config import service
    from control_plane.storage_config.schemas import GCSConfigIn

    other = uuid.uuid4()
    plane = DataPlane("memory://unused", credentials=world.runtime.plane.credentials,
                      impersonation_allowed=[
                          f"{other}={VICTIM_ACCOUNT}",
                          f"{world.tenant_id}=*@tenant-proj.iam.gserviceaccount.com"])
    own = "memplane@tenant-proj.iam.gserviceaccount.com"
    outcomes = {}
    try:
        for account in (VICTIM_ACCOUNT, own):
            body = GCSConfigIn.model_validate({"storage_type": "gcs", "connection_config": {
                "bucket": "bkt", "impersonate_service_account": account}})
            with pytest.raises(InvalidInput) as error:
                service.validated_row(plane, Actor(world.tenant_id, "api", "test"), body,
                                      allow_local=False, local_roots=[])
            outcomes[account] = (error.value.extra["problem"], error.value.detail)
    finally:
        plane.close()
    assert outcomes[VICTIM_ACCOUNT] == (
        "impersonation_not_allowed", f"{_bound_rule(VICTIM_ACCOUNT)}; nothing was saved")
    # The tenant's own account passes the rule; the probe then fails only because Google
    # cannot be reached from the test machine.
    assert outcomes[own][0] in ("unreachable", "auth_failed")


@pytest.mark.parametrize(("entry", "tenant", "account", "allowed"), [
    ("{t}=sa@p1.iam.gserviceaccount.com", "t", "sa@p1.iam.gserviceaccount.com", True),
    ("{t}=sa@p1.iam.gserviceaccount.com", "t", "SA@P1.iam.gserviceaccount.com", True),
    ("{t}=sa@p1.iam.gserviceaccount.com", "other", "sa@p1.iam.gserviceaccount.com", False),
    ("{t}=sa@p1.iam.gserviceaccount.com", "t", "sa2@p1.iam.gserviceaccount.com", False),
    ("{t}=*@p1.iam.gserviceaccount.com", "t", "any@p1.iam.gserviceaccount.com", True),
    ("{t}=*@p1.iam.gserviceaccount.com", "t", "any@p2.iam.gserviceaccount.com", False),
])
def test_impersonation_rules(entry: str, tenant: str, account: str, allowed: bool) -> None:
    from storage_adapters.identity import ImpersonationRules

    ids = {"t": uuid.uuid4(), "other": uuid.uuid4()}
    rules = ImpersonationRules.from_entries([entry.format(t=ids["t"])])
    assert rules.allows(ids[tenant], account) is allowed


def test_a_bad_impersonation_entry_is_refused_at_start(tmp_path: Any) -> None:
    from pydantic import ValidationError

    from control_plane.settings import Settings

    with pytest.raises(ValidationError) as error:
        Settings(data_dir=tmp_path, gcs_impersonation_allowed="acme=sa@p.iam.gserviceaccount.com")
    assert ("MEMPLANE_GCS_IMPERSONATION_ALLOWED entry 'acme=sa@p.iam.gserviceaccount.com' is "
            "not '<tenant id>=<service account>'") in str(error.value)
    tenant = uuid.uuid4()
    settings = Settings(data_dir=tmp_path, gcs_impersonation_allowed=(
        f"{tenant}=a@p.iam.gserviceaccount.com, {tenant}=*@q.iam.gserviceaccount.com"))
    assert settings.gcs_impersonation_allowed == [
        f"{tenant}=a@p.iam.gserviceaccount.com", f"{tenant}=*@q.iam.gserviceaccount.com"]
