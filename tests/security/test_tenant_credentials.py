"""No borrowed server credentials for tenant buckets (issue 10, point 1), and no tenant prefix
that reaches into another tenant's tree (point 7).

A tenant's storage configuration carries its own credentials or names an identity the server
assumes for it; only the operator's default bucket may use the server's credential chain. The
server's own identity is planted in the environment here, as it would be on a cloud host, so
a fallback would show up as an accepted configuration.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.security.http_servers import Recorder
from tests.support.emulators import Azurite, FakeGcsServer, MotoServer, unique_name
from tests.support.service import Stack, Tenant

SERVER_KEY_ID = "AKIASERVEROWNIDENTITY"
SERVER_SECRET = "server-own-secret-" + uuid.uuid4().hex
ROLE_ARN = "arn:aws:iam::123456789012:role/memplane-tenant"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
CONFIGURED = "; nothing was saved"


def _put(tenant: Tenant, body: dict[str, Any]) -> Any:
    with tenant.stack.http(tenant.admin_key) as http:
        return http.put("/v1/storage/config", json=body)


def _configure_audits(tenant: Tenant) -> list[str]:
    with tenant.stack.http(tenant.admin_key) as http:
        entries = http.get("/v1/audit", params={"limit": 1000}).json()["items"]
    return [e["success"] for e in entries if e["operation"] == "storage_configure"]


@pytest.fixture
def server_identity(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[None]:
    """The server's own AWS identity, as boto's default chain would find it on a host."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", SERVER_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SERVER_SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    yield


# -- fallback refused, per cloud ---------------------------------------------------------

def test_s3_without_own_credentials_is_refused(tenant: Tenant, s3_config: dict[str, Any],
                                               server_identity: None) -> None:
    config = {k: v for k, v in s3_config.items()
              if k not in ("access_key_id", "secret_access_key")}
    answer = _put(tenant, {"storage_type": "s3", "connection_config": config})
    assert answer.status_code == 422
    assert answer.json()["detail"] == (
        "body.s3.connection_config: Value error, give access_key_id and secret_access_key, or "
        "role_arn (a role this server assumes with ExternalId = your tenant id): this server "
        "does not lend its own AWS credentials")
    assert _configure_audits(tenant) == []


def test_gcs_without_own_credentials_is_refused(tenant: Tenant, gcs_config: dict[str, Any],
                                                monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Any) -> None:
    # The server's own Google identity, as google.auth.default would find it.
    key_file = tmp_path / "server-sa.json"
    key_file.write_text(json.dumps(_service_account("server-own@p.iam.gserviceaccount.com")))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    config = {k: v for k, v in gcs_config.items() if k != "anonymous"}
    answer = _put(tenant, {"storage_type": "gcs", "connection_config": config})
    assert answer.status_code == 422
    assert answer.json()["detail"] == (
        "body.gcs.connection_config: Value error, give exactly one of credentials_info (a "
        "service account key), impersonate_service_account (an account this server may "
        "impersonate) or anonymous: true (a public bucket): this server does not lend its own "
        "Google credentials")
    assert _configure_audits(tenant) == []


def test_azure_connection_string_without_a_key_is_refused(tenant: Tenant,
                                                          azurite_server: Azurite) -> None:
    container = unique_name("az")
    azurite_server.create_bucket(container)
    answer = _put(tenant, {"storage_type": "azure", "connection_config": {
        "container": container,
        "connection_string": f"BlobEndpoint={azurite_server.account_url};"}})
    assert answer.status_code == 422
    assert answer.json()["detail"] == (
        "body.azure.connection_config: Value error, the connection_string must carry "
        "AccountKey or SharedAccessSignature: this server does not lend its own credentials")
    assert _configure_audits(tenant) == []


def test_adapters_refuse_the_server_chain_unless_told_they_are_the_operators(
        moto_server: MotoServer, gcs_server: FakeGcsServer, azurite_server: Azurite,
        server_identity: None) -> None:
    from storage_adapters.azure import AzureAdapter
    from storage_adapters.gcs import GCSAdapter
    from storage_adapters.s3 import S3Adapter

    with pytest.raises(ValueError) as s3:
        S3Adapter("bkt", endpoint_url=moto_server.endpoint, region="us-east-1")
    assert str(s3.value) == (
        "an S3 bucket needs access_key_id and secret_access_key, or role_arn (a role this "
        "server assumes with ExternalId = your tenant id); this server does not lend its own "
        "AWS credentials")
    with pytest.raises(ValueError) as gcs:
        GCSAdapter("bkt", endpoint=gcs_server.endpoint)
    assert str(gcs.value).startswith("a GCS bucket needs credentials_info")
    with pytest.raises(ValueError) as azure:
        AzureAdapter("ctr", connection_string=f"BlobEndpoint={azurite_server.account_url};")
    assert str(azure.value).startswith("an Azure connection_string must carry AccountKey")

    # The operator's default bucket is the one place the server's chain serves.
    bucket = unique_name("s3")
    moto_server.create_bucket(bucket)
    from storage_adapters.registry import from_url

    adapter = from_url(f"s3://{bucket}?endpoint_url={moto_server.endpoint}&region=us-east-1",
                       allow_ambient_credentials=True)
    try:
        assert adapter.health_check().ok
    finally:
        adapter.close()


# -- S3: a role assumed with ExternalId = the tenant id ----------------------------------

class RecordingMoto(MotoServer):
    """A moto that records every request it answers (its recorder API)."""

    def __init__(self, path: Any) -> None:
        super().__init__()
        self.env = {**(self.env or {}), "MOTO_RECORDER_FILEPATH": str(path)}

    def start_recording(self) -> None:
        urllib.request.urlopen(urllib.request.Request(
            f"{self.endpoint}/moto-api/recorder/reset-recording", method="POST")).close()
        urllib.request.urlopen(urllib.request.Request(
            f"{self.endpoint}/moto-api/recorder/start-recording", method="POST")).close()

    def recorded(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(
                f"{self.endpoint}/moto-api/recorder/download-recording") as answer:
            return [json.loads(line) for line in answer.read().decode().splitlines() if line]


@pytest.fixture(scope="module")
def recording_moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordingMoto]:
    from tests.support.emulator_fixtures import _started

    yield from _started(lambda: RecordingMoto(
        tmp_path_factory.mktemp("moto-recording") / "recording.jsonl"))


def _body(entry: dict[str, Any]) -> str:
    import base64

    body = entry.get("body") or ""
    return base64.b64decode(body).decode("latin-1") if entry.get("body_encoded") else body


def _key_id(entry: dict[str, Any]) -> str:
    authorization = {k.lower(): v for k, v in entry["headers"].items()}.get(
        "authorization", "")
    return authorization.split("Credential=", 1)[1].split("/", 1)[0] if \
        "Credential=" in authorization else ""


def test_role_is_assumed_with_the_tenant_id_as_external_id(
        tenant: Tenant, recording_moto: RecordingMoto, server_identity: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The operator points the server's STS and S3 calls at moto, as AWS_ENDPOINT_URL_STS and
    # AWS_ENDPOINT_URL_S3 do (a tenant's role never goes with an endpoint_url of its own).
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", recording_moto.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", recording_moto.endpoint)
    bucket = unique_name("s3")
    recording_moto.create_bucket(bucket)
    recording_moto.start_recording()
    answer = _put(tenant, {"storage_type": "s3", "connection_config": {
        "bucket": bucket, "region": "us-east-1", "role_arn": ROLE_ARN}})
    assert answer.status_code == 200, answer.text
    assert answer.json()["secrets_set"] == []
    assert answer.json()["connection_config"]["role_arn"] == ROLE_ARN
    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="u1", key="k", value="under the role")
        assert client.memory.get(scope="user", scope_ref="u1", key="k").value == "under the role"

    requests = recording_moto.recorded()
    assume = [r for r in requests if "Action=AssumeRole" in _body(r)]
    assert len(assume) == 2  # the probe's adapter, then the tenant's shared one
    for entry in assume:
        assert f"ExternalId={tenant.id}" in _body(entry)
        assert f"RoleArn={ROLE_ARN.replace(':', '%3A').replace('/', '%2F')}" in _body(entry)
        assert _key_id(entry) == SERVER_KEY_ID  # the server's identity: only for STS
    bucket_calls = [r for r in requests if r not in assume]
    assert bucket_calls
    signed_with = {_key_id(r) for r in bucket_calls}
    assert SERVER_KEY_ID not in signed_with
    assert all(key.startswith("ASIA") for key in signed_with), signed_with
    assert all({k.lower() for k in r["headers"]} >= {"x-amz-security-token"}
               for r in bucket_calls)


def test_assumed_role_credentials_are_refreshed_before_they_expire(
        recording_moto: RecordingMoto, server_identity: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC, datetime, timedelta

    from storage_adapters.s3 import S3Adapter

    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", recording_moto.endpoint)
    bucket = unique_name("s3")
    recording_moto.create_bucket(bucket)
    recording_moto.start_recording()
    adapter = S3Adapter(bucket, region="us-east-1", endpoint_url=recording_moto.endpoint,
                        role_arn=ROLE_ARN, external_id="tenant-x")
    try:
        adapter.put("a", b"1")
        credentials = adapter._client._request_signer._credentials
        first = credentials.get_frozen_credentials().access_key
        # Five minutes before expiry botocore must fetch new ones before the next request.
        credentials._expiry_time = datetime.now(UTC) + timedelta(minutes=5)
        adapter.put("b", b"2")
        second = credentials.get_frozen_credentials().access_key
    finally:
        adapter.close()
    assert first != second
    assert len([r for r in recording_moto.recorded() if "Action=AssumeRole" in _body(r)]) == 2


# -- GCS: tokens only from Google ---------------------------------------------------------

def _service_account(email: str, token_uri: str = GOOGLE_TOKEN_URI) -> dict[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    return {"type": "service_account", "project_id": "p", "private_key_id": "k1",
            "private_key": pem, "client_email": email, "client_id": "1",
            "token_uri": token_uri}


def test_gcs_token_uri_is_forced_to_googles(tenant: Tenant, gcs_config: dict[str, Any]) -> None:
    from storage_adapters.gcs import GCSAdapter

    with Recorder() as token_server:
        info = _service_account("tenant@p.iam.gserviceaccount.com", token_server.url + "/token")
        config = {k: v for k, v in gcs_config.items() if k != "anonymous"}
        answer = _put(tenant, {"storage_type": "gcs", "connection_config": {
            **config, "credentials_info": info}})
        adapter = GCSAdapter.from_config({**config, "credentials_info": info})
        try:
            assert adapter._credentials._token_uri == GOOGLE_TOKEN_URI
        finally:
            adapter.close()
        assert token_server.hits == []
    # Google cannot be reached from the test machine: the probe fails there, not at the key's
    # token_uri.
    assert answer.status_code == 422
    assert answer.json()["problem"] == "unreachable"
    assert info["private_key"] not in answer.text


def test_gcs_impersonation_uses_the_server_identity_only_to_mint_tokens(
        gcs_server: FakeGcsServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from google.auth import impersonated_credentials

    from storage_adapters.gcs import GCSAdapter

    key_file = tmp_path / "server-sa.json"
    key_file.write_text(json.dumps(_service_account("server-own@p.iam.gserviceaccount.com")))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    adapter = GCSAdapter("bkt", endpoint=gcs_server.endpoint,
                         impersonate_service_account="tenant-sa@t.iam.gserviceaccount.com")
    try:
        credentials = adapter._credentials
        assert isinstance(credentials, impersonated_credentials.Credentials)
        assert credentials.service_account_email == "tenant-sa@t.iam.gserviceaccount.com"
        assert credentials._source_credentials.service_account_email == (
            "server-own@p.iam.gserviceaccount.com")
    finally:
        adapter.close()


# -- prefixes ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", ["memplane/{other}", "acme/{other}/agents", "{other}"])
def test_a_prefix_naming_another_tenant_is_refused(stack: Stack, s3_config: dict[str, Any],
                                                   shape: str) -> None:
    victim, attacker = stack.new_tenant(), stack.new_tenant()
    with victim.client() as client:
        assert client.storage.configure(storage_type="s3", connection_config=s3_config
                                        ).prefix == f"memplane/{victim.id}"
    prefix = shape.format(other=victim.id)
    answer = _put(attacker, {"storage_type": "s3",
                             "connection_config": {**s3_config, "prefix": prefix}})
    assert answer.status_code == 422
    assert answer.json()["detail"] == (
        f"prefix segment '{victim.id}' looks like another tenant's id; a prefix must not "
        "contain a tenant id other than your own — choose a prefix without it")
    # An id that belongs to no tenant is refused alike: the answer reveals no tenant ids.
    stranger = _put(attacker, {"storage_type": "s3", "connection_config": {
        **s3_config, "prefix": f"memplane/{uuid.uuid4()}"}})
    assert stranger.status_code == 422
    assert stranger.json()["problem"] == "prefix_not_allowed"
    own = _put(attacker, {"storage_type": "s3", "connection_config": {
        **s3_config, "prefix": f"memplane/{attacker.id}"}})
    assert own.status_code == 200, own.text
    assert own.json()["prefix"] == f"memplane/{attacker.id}/{attacker.id}"
