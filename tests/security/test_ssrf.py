"""No SSRF through a tenant's storage endpoint (issue 10, point 2).

Custom endpoints only where the operator allows them (MEMPLANE_ALLOWED_ENDPOINTS; the test
stack allows 127.0.0.1/32 for its emulators); loopback, private, link-local and metadata
addresses refused after DNS resolution, at connect time, redirects included; the tenant sees
generic problem codes, never what the remote answered, and cannot tell an open port from a
closed one.
"""

from __future__ import annotations

import base64
import ipaddress
import logging
import socket
from typing import Any

import httpx
import pytest
import requests

from tests.api.test_no_content_in_control_plane import _database_text
from tests.security.http_servers import Recorder
from tests.support.emulators import MotoServer, closed_port
from tests.support.service import Tenant

ACCOUNT_KEY = base64.b64encode(b"not-a-real-account-key-0123456789").decode()
REFUSED = ("the storage endpoint is not allowed on this server: use the cloud's own endpoint, "
           "or one the operator lists in MEMPLANE_ALLOWED_ENDPOINTS (loopback, private, "
           "link-local and metadata addresses are refused) (endpoint_not_allowed); nothing was "
           "saved — fix the connection_config and retry")
UNREACHABLE = ("the storage endpoint could not be reached, or did not answer as a bucket "
               "(unreachable); nothing was saved — fix the connection_config and retry")


def _put(tenant: Tenant, body: dict[str, Any]) -> Any:
    with tenant.stack.http(tenant.admin_key) as http:
        return http.put("/v1/storage/config", json=body)


def _s3(endpoint: str) -> dict[str, Any]:
    return {"storage_type": "s3", "connection_config": {
        "bucket": "bkt", "region": "us-east-1", "endpoint_url": endpoint,
        "access_key_id": "AKIATENANT", "secret_access_key": "tenant-secret"}}


def _gcs(endpoint: str) -> dict[str, Any]:
    return {"storage_type": "gcs", "connection_config": {
        "bucket": "bkt", "endpoint": endpoint, "anonymous": True, "use_batch": False}}


def _azure(endpoint: str) -> dict[str, Any]:
    return {"storage_type": "azure", "connection_config": {
        "container": "ctr", "account_url": f"{endpoint}/acct", "account_key": ACCOUNT_KEY}}


def _azure_string(connection_string: str) -> dict[str, Any]:
    return {"storage_type": "azure", "connection_config": {
        "container": "ctr", "connection_string": connection_string}}


# -- endpoints outside the allow-list ----------------------------------------------------

@pytest.mark.parametrize("body", [
    _s3("http://storage.evil.example:9000"),
    _s3("http://169.254.169.254/latest/meta-data"),
    _s3("http://10.0.0.5:9000"),
    _s3("http://[::1]:9000"),
    _gcs("http://storage.evil.example"),
    _gcs("http://169.254.169.254"),
    _azure("http://storage.evil.example"),
    _azure_string(f"BlobEndpoint=http://169.254.169.254/acct;AccountKey={ACCOUNT_KEY};"),
    _azure_string(f"AccountName=acct;AccountKey={ACCOUNT_KEY};EndpointSuffix=evil.example"),
], ids=["s3-unknown-host", "s3-metadata", "s3-private", "s3-ipv6-loopback", "gcs-unknown-host",
        "gcs-metadata", "azure-unknown-host", "azure-blob-endpoint-metadata",
        "azure-endpoint-suffix"])
def test_endpoint_outside_the_allow_list_is_refused(tenant: Tenant,
                                                    body: dict[str, Any]) -> None:
    answer = _put(tenant, body)
    assert answer.status_code == 422
    # endpoint_not_allowed, not unreachable: the guard refused it before any connection
    assert answer.json()["problem"] == "endpoint_not_allowed"
    assert answer.json()["detail"] == REFUSED
    with tenant.client() as client:
        [failure] = client.audit.list(operation="storage_configure").items
    assert failure.success is False
    assert "(endpoint_not_allowed)" in failure.detail


def test_a_name_resolving_to_loopback_is_refused_at_connect_time(
        world: Any, moto_server: MotoServer) -> None:
    """'localhost' is allowed as a host pattern, but resolves to 127.0.0.1, which only a CIDR
    of the allow-list could allow."""
    from control_plane.errors import InvalidInput
    from control_plane.plane.data_plane import DataPlane
    from control_plane.storage_config import service
    from control_plane.storage_config.schemas import S3ConfigIn

    bucket = f"loopback-{world.tenant_id.hex[:12]}"
    moto_server.create_bucket(bucket)
    config = _s3(f"http://localhost:{moto_server.port}")
    config["connection_config"]["bucket"] = bucket
    body = S3ConfigIn.model_validate(config)
    credentials = world.runtime.plane.credentials
    for allowed, refused in ((["localhost"], True), (["localhost", "127.0.0.1/32"], False)):
        plane = DataPlane("memory://unused", credentials=credentials,
                          allowed_endpoints=allowed)
        try:
            with world.runtime.sessions() as session:
                if refused:
                    with pytest.raises(InvalidInput) as error:
                        service.configure(session, plane, world.actor, body,
                                          allow_local=False, local_roots=[])
                    assert error.value.extra == {"problem": "endpoint_not_allowed"}
                    assert error.value.detail == REFUSED
                else:
                    saved = service.configure(session, plane, world.actor, body,
                                              allow_local=False, local_roots=[])
                    assert saved.endpoint == f"http://localhost:{moto_server.port}"
        finally:
            plane.close()


@pytest.mark.parametrize("make", [_gcs, _azure], ids=["gcs", "azure"])
def test_redirects_do_not_escape_the_guard(tenant: Tenant, make: Any) -> None:
    with Recorder("127.0.0.2", body=b"never") as inside, \
            Recorder(status=307) as front:
        front.headers = {"Location": f"{inside.url}/elsewhere"}
        answer = _put(tenant, make(front.url))
        assert front.hits  # the allowed endpoint was asked
        assert inside.hits == []  # its redirect to 127.0.0.2 was not followed
    assert answer.status_code == 422
    assert answer.json()["problem"] == "endpoint_not_allowed"


# -- what the tenant is told ---------------------------------------------------------------

SECRET = "SECRET-REMOTE-BODY-7f3a"
HOSTILE = (f"<?xml version='1.0'?><Error><Code>{SECRET}Code</Code><Message>{SECRET} internal "
           f"admin token</Message></Error>").encode()


def test_a_remote_body_is_never_echoed(tenant: Tenant, moto_server: MotoServer,
                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    bucket = f"echo-{tenant.id.hex[:12]}"
    moto_server.create_bucket(bucket)
    with Recorder(forward_to=moto_server.endpoint) as trap:
        config = _s3(trap.url)
        config["connection_config"]["bucket"] = bucket
        assert _put(tenant, config).status_code == 200
        trap.mode, trap.status, trap.body = "answer", 400, HOSTILE
        trap.headers = {"Content-Type": "application/xml"}
        with tenant.stack.http(tenant.admin_key) as http:
            health = http.get("/v1/storage/health")
            again = http.put("/v1/storage/config", json=config)
            audit = http.get("/v1/audit", params={"limit": 1000})
        assert trap.hits[-1].method in ("PUT", "GET", "DELETE", "POST", "HEAD")
    assert health.status_code == 200
    assert (health.json()["ok"], health.json()["problem"], health.json()["reachable"]) == (
        False, "unreachable", False)
    assert health.json()["probe"] == (
        "the storage endpoint could not be reached, or did not answer as a bucket")
    assert again.status_code == 422
    assert again.json()["detail"] == UNREACHABLE
    details = [e["detail"] for e in audit.json()["items"]
               if e["operation"] in ("storage_health", "storage_configure")]
    assert any("failure=unreachable" in d for d in details)
    for text in (health.text, again.text, audit.text, _database_text(tenant)):
        assert SECRET not in text
    assert [r.getMessage() for r in caplog.records
            if SECRET in r.getMessage() and r.levelno > logging.DEBUG] == []


@pytest.mark.parametrize("make", [_s3, _gcs, _azure], ids=["s3", "gcs", "azure"])
def test_open_and_closed_ports_answer_alike(tenant: Tenant, make: Any) -> None:
    with Recorder(body=f"{SECRET} a service that is not a bucket".encode()) as open_port:
        opened = _put(tenant, make(open_port.url))
        assert open_port.hits
    closed = _put(tenant, make(f"http://127.0.0.1:{closed_port()}"))
    assert (opened.status_code, opened.json()) == (closed.status_code, closed.json())
    assert opened.json()["problem"] == "unreachable"
    assert opened.json()["detail"] == UNREACHABLE
    assert SECRET not in opened.text


# -- the guard itself ----------------------------------------------------------------------

@pytest.mark.parametrize(("address", "special"), [
    ("127.0.0.1", True), ("10.1.2.3", True), ("172.16.0.1", True), ("192.168.1.1", True),
    ("169.254.169.254", True), ("fd00:ec2::254", True), ("::1", True), ("fe80::1", True),
    ("fc00::1", True), ("100.64.0.1", True), ("0.0.0.0", True), ("224.0.0.1", True),
    ("::ffff:127.0.0.1", True), ("::", True), ("8.8.8.8", False), ("2a00:1450::1", False),
])
def test_address_classes(address: str, special: bool) -> None:
    from storage_adapters.netguard import EndpointPolicy

    policy = EndpointPolicy.from_entries([])
    assert policy.address_allowed(ipaddress.ip_address(address)) is not special


def test_check_endpoint() -> None:
    from storage_adapters.netguard import EndpointNotAllowed, EndpointPolicy

    policy = EndpointPolicy.from_entries(["*.corp.example", "10.20.0.0/16"],
                                         public_hosts=["*.amazonaws.com"])
    assert policy.check_endpoint("https://s3.eu-west-1.amazonaws.com") == (
        "s3.eu-west-1.amazonaws.com")
    assert policy.check_endpoint("http://minio.corp.example:9000") == "minio.corp.example"
    assert policy.check_endpoint("http://10.20.3.4:9000") == "10.20.3.4"
    for url, reason in [
        ("http://10.21.0.1", "the endpoint host '10.21.0.1' is not allowed on this server"),
        ("http://8.8.8.8", "the endpoint host '8.8.8.8' is not allowed on this server"),
        ("ftp://minio.corp.example", "an endpoint must be an http:// or https:// URL"),
        ("http://user:pw@minio.corp.example", "an endpoint URL must not carry a user name"),
        ("http://corp.example.evil.example", "the endpoint host 'corp.example.evil.example'"),
    ]:
        with pytest.raises(EndpointNotAllowed) as refused:
            policy.check_endpoint(url)
        assert str(refused.value).startswith(reason)
    with pytest.raises(ValueError) as bad:
        EndpointPolicy.from_entries(["http://x"])
    assert str(bad.value).startswith("allowed endpoint 'http://x' is neither a host pattern")


def test_metadata_address_is_refused_without_connecting(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    from storage_adapters.netguard import EndpointNotAllowed, EndpointPolicy

    connected: list[Any] = []
    real_connect = socket.socket.connect

    def spy(self: socket.socket, address: Any) -> None:
        connected.append(address)
        real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", spy)
    policy = EndpointPolicy.from_entries(["*"])  # every name, but no address range
    for host in ("169.254.169.254", "fd00:ec2::254", "localhost"):
        with pytest.raises(EndpointNotAllowed):
            policy.connect((host, 80), 1.0)
    assert connected == []


def test_http_clients_are_guarded_at_connect_time() -> None:
    """The guard for the summariser and embedder clients to come: requests and httpx."""
    from storage_adapters.netguard import EndpointNotAllowed, EndpointPolicy, refusal_in

    with Recorder(body=b"hello") as server:
        named = f"http://localhost:{server.port}/"
        by_name = EndpointPolicy.from_entries(["localhost"])
        with by_name.requests_session() as session, pytest.raises(
                requests.ConnectionError) as refused:
            session.get(named)
        assert isinstance(refusal_in(refused.value), EndpointNotAllowed)
        with httpx.Client(transport=by_name.httpx_transport()) as client, pytest.raises(
                EndpointNotAllowed):
            client.get(named)
        assert server.hits == []

        allowed = EndpointPolicy.from_entries(["localhost", "127.0.0.1/32"])
        with allowed.requests_session() as session:
            assert session.get(named).content == b"hello"
        with httpx.Client(transport=allowed.httpx_transport()) as client:
            assert client.get(named).content == b"hello"
        assert len(server.hits) == 2


def test_an_endpoint_the_operator_no_longer_allows_is_reported(
        world: Any, moto_server: MotoServer) -> None:
    from control_plane.errors import StorageMisconfigured
    from control_plane.plane.data_plane import DataPlane
    from control_plane.storage_config import service
    from control_plane.storage_config.schemas import S3ConfigIn

    bucket = f"narrowed-{world.tenant_id.hex[:12]}"
    moto_server.create_bucket(bucket)
    config = _s3(moto_server.endpoint)
    config["connection_config"]["bucket"] = bucket
    with world.runtime.sessions() as session:
        service.configure(session, world.runtime.plane, world.actor,
                          S3ConfigIn.model_validate(config), allow_local=False, local_roots=[])
    narrowed = DataPlane("memory://unused", credentials=world.runtime.plane.credentials,
                         allowed_endpoints=[])
    try:
        with world.runtime.sessions() as session:
            health = service.check_health(session, narrowed, world.actor)
            with pytest.raises(StorageMisconfigured) as refused:
                narrowed.active(session, world.tenant_id)
    finally:
        narrowed.close()
    assert (health.ok, health.problem, health.reachable) == (
        False, "endpoint_not_allowed", False)
    assert health.probe == "the storage endpoint is not allowed on this server"
    assert refused.value.detail == (
        "the configured storage endpoint is not allowed on this server any more; an admin "
        "must configure the storage again")
