"""The smaller findings of the multi-tenant review (issue 10, point 7), one test each: every
one answered 500, grew without bound or was open before; each now gets a clear 4xx."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from control_plane.db.models import AccessLog, KekVersion, MemoryPointer
from control_plane.kit import encode_cursor
from tests.support.emulators import MOTO_KEY_ID, MOTO_REGION, MOTO_SECRET, MotoServer
from tests.support.service import ServerThread, Stack, Tenant, make_settings

MAX_BODY = 64 * 1024
MAX_OBJECT = 8 * 1024
METRICS_TOKEN = "metrics-" + uuid.uuid4().hex
JSON = {"content-type": "application/json"}
MAX_JSON_DEPTH = 64  # control_plane.observability.json_depth.MAX_JSON_DEPTH, the documented limit


@pytest.fixture(scope="module")
def hardened(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A server with small limits and a metrics token, on each database backend."""
    data_dir = tmp_path_factory.mktemp("hardened")
    settings = make_settings(database, data_dir, max_body_bytes=MAX_BODY,
                             max_object_bytes=MAX_OBJECT, metrics_token=METRICS_TOKEN)
    server = ServerThread(settings).start()
    try:
        yield Stack(f"http://127.0.0.1:{server.port}", settings, server.app.state.runtime)
    finally:
        server.stop()


@pytest.fixture
def small(hardened: Stack) -> Tenant:
    return hardened.new_tenant()


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _pointers(tenant: Tenant) -> list[MemoryPointer]:
    with Session(tenant.stack.engine) as session:
        return list(session.scalars(select(MemoryPointer)
                                    .where(MemoryPointer.tenant_id == tenant.id)))


# --- 1. MEMPLANE_MAX_OBJECT_BYTES caps what one memory stores ---------------------------------

def test_append_stops_at_max_object_bytes(small: Tenant) -> None:
    item = "x" * 1000  # 1002 bytes serialised; n items make a list of 1003 * n + 1 bytes
    with small.stack.http(small.admin_key) as http:
        statuses = [http.post("/v1/memories/user/u1/log/append", json={"value": item})
                    for _ in range(9)]
        stored = http.get("/v1/memories/user/u1/log")
    assert [r.status_code for r in statuses] == [200] * 8 + [413], statuses[-1].text
    assert statuses[-1].json() == {
        "error": "payload_too_large",
        "detail": "the stored value would be 9028 bytes, over this server's limit of 8192 "
                  "bytes per memory (MEMPLANE_MAX_OBJECT_BYTES); keep the value smaller, or "
                  "start a new key instead of appending to this one"}
    assert stored.json()["value"] == [item] * 8
    assert stored.json()["pointer"]["content_size"] == 8025
    assert stored.json()["pointer"]["version"] == 8


def test_put_over_max_object_bytes_is_413(small: Tenant) -> None:
    with small.stack.http(small.admin_key) as http:
        too_big = http.put("/v1/memories/user/u1/k", json={"value": "y" * 9000})
        fits = http.put("/v1/memories/user/u1/k", json={"value": "y" * 8190})
    assert too_big.status_code == 413, too_big.text
    assert too_big.json()["error"] == "payload_too_large"
    assert too_big.json()["detail"].startswith(
        "the stored value would be 9002 bytes, over this server's limit of 8192 bytes")
    assert fits.status_code == 200, fits.text
    assert fits.json()["content_size"] == 8192
    assert [p.version for p in _pointers(small)] == [1]


# --- 2. deeply nested JSON is refused, not a 500 ----------------------------------------------

@pytest.mark.parametrize("path,method,body", [
    ("/v1/memories/user/u1/deep", "PUT", {"value": _nested(900)}),
    ("/v1/memories/user/u1/deep/append", "POST", {"value": _nested(900)}),
    ("/v1/memories/user/u1/deep", "PUT", {"value": 1, "tags": _nested(900)}),
    ("/v1/api-keys", "POST", {"role": "agent", "name": _nested(900)}),
    ("/v1/storage/config", "PUT", {"storage_type": "local", "connection_config": json.loads(
        '{"root":' * 900 + '"x"' + "}" * 900)}),
], ids=["put", "append", "tags", "api-key", "storage-config"])
def test_900_deep_json_is_422(tenant: Tenant, path: str, method: str, body: Any) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        response = http.request(method, path, content=json.dumps(body), headers=JSON)
    assert response.status_code == 422, response.text
    assert response.json() == {
        "error": "validation_error",
        "detail": f"the request body nests JSON more than {MAX_JSON_DEPTH} levels deep; "
                  "flatten the value (or store deep structures as a JSON string)"}
    assert _pointers(tenant) == []


def test_json_at_the_depth_limit_round_trips(tenant: Tenant) -> None:
    value = _nested(MAX_JSON_DEPTH - 1)  # inside {"value": ...}: exactly the limit
    with tenant.stack.http(tenant.admin_key) as http:
        put = http.put("/v1/memories/user/u1/deep", json={"value": value})
        got = http.get("/v1/memories/user/u1/deep")
    assert put.status_code == 200, put.text
    assert got.json()["value"] == value


def test_depth_check_ignores_brackets_in_strings() -> None:
    from control_plane.observability.json_depth import MAX_JSON_DEPTH as limit
    from control_plane.observability.json_depth import nests_deeper

    assert limit == MAX_JSON_DEPTH
    assert nests_deeper(json.dumps({"v": "[" * 500}).encode(), 64) is False
    assert nests_deeper(json.dumps({"v": '"\\[' * 500}).encode(), 64) is False
    assert nests_deeper(json.dumps({"v": "]" * 70, "w": _nested(70)}).encode(), 64) is True
    assert nests_deeper(json.dumps([{"a": [1, {"b": "["}]}] * 5000).encode(), 64) is False
    assert nests_deeper(json.dumps(_nested(64)).encode(), 64) is False
    assert nests_deeper(json.dumps(_nested(65)).encode(), 64) is True
    assert nests_deeper(b"[" * 70, 64) is False  # malformed: the parser says so


@pytest.mark.timeout(60)
def test_depth_check_is_linear_on_malformed_strings() -> None:
    from control_plane.observability.json_depth import nests_deeper

    # Escaped quotes with no closing one: a string pattern that restarts at every quote does
    # about n²/2 steps — for two million escapes, hours — where a linear scan takes well
    # under a second. The timeout (60 s, four orders of magnitude of margin either way, so a
    # loaded machine cannot decide it) is what fails a quadratic check.
    for tail in (b"", b"\\"):
        body = b"[" * 65 + b'"' + b'\\"' * 2_000_000 + tail
        assert nests_deeper(body, 64) is False
        assert nests_deeper(b"[" * 65 + b'"x"' + b"]" * 65, 64) is True


# --- 3. an out-of-range cursor is refused ----------------------------------------------------

@pytest.mark.parametrize("cursor", [
    encode_cursor(10**30), encode_cursor(2**63), encode_cursor(-1), encode_cursor(True),
    encode_cursor("7"), encode_cursor(1.5), "garbage%%", encode_cursor(None),
], ids=["huge", "2^63", "negative", "true", "string", "float", "not-base64", "null"])
def test_out_of_range_cursors_are_422(tenant: Tenant, cursor: str) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        audit = http.get("/v1/audit", params={"cursor": cursor})
        pointers = http.get("/v1/pointers", params={"cursor": cursor})
    for response in (audit, pointers):
        assert response.status_code == 422, (response.request.url, response.text)
        assert response.json()["error"] == "validation_error"
        assert response.json()["detail"].startswith("cursor is not valid; pass the next_cursor")


# --- 4. /metrics behind a token when one is set -----------------------------------------------

def test_metrics_need_the_token_when_one_is_set(hardened: Stack, stack: Stack) -> None:
    with httpx.Client(base_url=hardened.base_url) as http:
        anonymous = http.get("/metrics")
        wrong = http.get("/metrics", headers={"Authorization": "Bearer nope"})
        prefix = http.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN[:-1]}"})
        right = http.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    for refused in (anonymous, wrong, prefix):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert refused.json() == {
            "error": "unauthorized",
            "detail": "this server protects /metrics: send its metrics token as "
                      "'Authorization: Bearer <token>' (MEMPLANE_METRICS_TOKEN)"}
        assert "memplane_http_requests" not in refused.text
    assert right.status_code == 200
    assert "memplane_http_requests_total" in right.text
    with httpx.Client(base_url=stack.base_url) as http:
        assert http.get("/metrics").status_code == 200  # no token configured: open


# --- 5. a chunked body over the limit is 413 --------------------------------------------------

def _chunks(total: int, prefix: bytes = b'{"value": "', suffix: bytes = b'"}') -> Iterator[bytes]:
    yield prefix
    for _ in range(total // 4096):
        yield b"z" * 4096
    yield suffix


def test_chunked_body_over_the_limit_is_413(small: Tenant) -> None:
    with small.stack.http(small.admin_key) as http:
        big = http.put("/v1/memories/user/u1/k", content=_chunks(MAX_BODY + 8192), headers=JSON)
        fine = http.put("/v1/memories/user/u1/k", content=_chunks(4096), headers=JSON)
    assert "content-length" not in big.request.headers
    assert big.request.headers["transfer-encoding"] == "chunked"
    assert big.status_code == 413, big.text
    assert big.json() == {"error": "payload_too_large",
                          "detail": f"the request body is larger than {MAX_BODY} bytes; "
                                    "store large content in smaller memories"}
    assert fine.status_code == 200, fine.text
    assert fine.json()["content_size"] == 4096 + 2
    assert len(_pointers(small)) == 1


# --- 6. a body that is not JSON is 415 --------------------------------------------------------

@pytest.mark.parametrize("content_type,said", [
    ("text/plain", "'text/plain'"),
    ("application/x-www-form-urlencoded", "'application/x-www-form-urlencoded'"),
    ("multipart/form-data; boundary=x", "'multipart/form-data; boundary=x'"),
    (None, "no Content-Type"),
])
def test_a_body_that_is_not_json_is_415(tenant: Tenant, content_type: str | None,
                                        said: str) -> None:
    headers = {"content-type": content_type} if content_type else {}
    with tenant.stack.http(tenant.admin_key) as http:
        response = http.put("/v1/memories/user/u1/k", content=b'{"value": 1}', headers=headers)
    assert response.status_code == 415, response.text
    assert response.json() == {
        "error": "unsupported_media_type",
        "detail": f"the request body was sent with {said}; send JSON with "
                  "'Content-Type: application/json'"}
    assert _pointers(tenant) == []


def test_json_content_types_are_accepted(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        plain = http.put("/v1/memories/user/u1/a", content=b'{"value": 1}',
                         headers={"content-type": "application/json; charset=utf-8"})
        suffixed = http.put("/v1/memories/user/u1/b", content=b'{"value": 2}',
                            headers={"content-type": "Application/Vnd.Api+JSON"})
        # A route without a body may still be called with a JSON content type and none.
        empty = http.post("/v1/keys/rotate", headers={"content-type": "text/plain"})
    assert (plain.status_code, suffixed.status_code, empty.status_code) == (200, 200, 200)


# --- 7. a tenant admin may point its KEK only at KMS keys the operator allows ------------------

def _kms_server(moto: MotoServer, tmp_path: Path, **overrides: Any) -> tuple[ServerThread, Any]:
    kms = boto3.client("kms", endpoint_url=moto.endpoint, region_name=MOTO_REGION,
                       aws_access_key_id=MOTO_KEY_ID, aws_secret_access_key=MOTO_SECRET)
    own = kms.create_key(Description="server KEK")["KeyMetadata"]["Arn"]
    settings = make_settings("sqlite", tmp_path, kek_provider="aws-kms", kek_aws_key_id=own,
                             kek_aws_region=MOTO_REGION, kek_aws_endpoint_url=moto.endpoint,
                             kek_aws_access_key_id=MOTO_KEY_ID,
                             kek_aws_secret_access_key=MOTO_SECRET, **overrides)
    return ServerThread(settings).start(), kms


def _rotate(stack: Stack, tenant: Tenant, key_ref: str | None) -> httpx.Response:
    body = {"provider": "aws-kms", **({"key_ref": key_ref} if key_ref else {})}
    with stack.http(tenant.admin_key) as http:
        return http.post("/v1/keys/rotate", json=body)


def _kek_refs(stack: Stack, tenant: Tenant) -> list[str]:
    with stack.engine.connect() as conn:
        return list(conn.scalars(select(KekVersion.key_ref)
                                 .where(KekVersion.tenant_id == tenant.id)
                                 .order_by(KekVersion.version)))


def test_kms_key_refs_outside_the_allow_list_are_refused(moto_server: MotoServer,
                                                         tmp_path: Path) -> None:
    server, kms = _kms_server(moto_server, tmp_path)
    stack = Stack(f"http://127.0.0.1:{server.port}", server.app.state.runtime.settings,
                  server.app.state.runtime)
    try:
        tenant = stack.new_tenant()
        foreign = kms.create_key(Description="someone else's key")["KeyMetadata"]["Arn"]
        own = stack.settings.kek_aws_key_id
        assert own is not None
        refused = [_rotate(stack, tenant, ref)
                   for ref in (foreign, "alias/aws/s3", own + "*", own[:-1])]
        allowed = _rotate(stack, tenant, own)
        default = _rotate(stack, tenant, None)
        for response in refused:
            assert response.status_code == 422, response.text
            assert response.json() == {
                "error": "validation_error",
                "detail": "this server does not let tenants use that KMS key; leave key_ref "
                          "out to use the server's key, or ask the operator to add it to "
                          "MEMPLANE_KEK_AWS_ALLOWED_KEY_REFS"}
        assert (allowed.status_code, default.status_code) == (200, 200), allowed.text
        assert _kek_refs(stack, tenant) == [own, own]
        with stack.engine.connect() as conn:
            details = list(conn.scalars(select(AccessLog.detail)
                                        .where(AccessLog.tenant_id == tenant.id,
                                               AccessLog.operation == "kek_rotate",
                                               AccessLog.success.is_(False))))
        assert len(details) == 4 and not any(foreign in (d or "") for d in details)
    finally:
        server.stop()


def test_kms_allow_list_patterns_name_each_tenant_its_own_keys(moto_server: MotoServer,
                                                               tmp_path: Path) -> None:
    server, kms = _kms_server(moto_server, tmp_path, kek_aws_allowed_key_refs=(
        "alias/tenant-{tenant_id}, arn:aws:kms:*:*:alias/tenant-{tenant_id}"))
    stack = Stack(f"http://127.0.0.1:{server.port}", server.app.state.runtime.settings,
                  server.app.state.runtime)
    try:
        first, second = stack.new_tenant(), stack.new_tenant()
        key = kms.create_key(Description="first tenant's key")["KeyMetadata"]["KeyId"]
        kms.create_alias(AliasName=f"alias/tenant-{first.id}", TargetKeyId=key)
        mine = _rotate(stack, first, f"alias/tenant-{first.id}")
        theirs = _rotate(stack, second, f"alias/tenant-{first.id}")
        server_key = _rotate(stack, second, stack.settings.kek_aws_key_id)
        assert mine.status_code == 200, mine.text
        assert (theirs.status_code, server_key.status_code) == (422, 422)
        assert _kek_refs(stack, first) == [f"alias/tenant-{first.id}"]
        assert _kek_refs(stack, second) == []
        with stack.http(first.admin_key) as http:
            assert http.put("/v1/memories/user/u1/k", json={"value": "sealed"}).status_code == 200
            assert http.get("/v1/memories/user/u1/k").json()["value"] == "sealed"
    finally:
        server.stop()

