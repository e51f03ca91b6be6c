"""Several storage configurations per tenant (``/v1/storage/configs``): each is probed
before it is saved, addressed by ``sc_…``, renamed, made the default, and deleted only when
nothing lives in it; the single-configuration routes keep showing the default."""

from __future__ import annotations

import re
import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from control_plane.db.models import MemoryPointer
from tests.support.buckets import S3Bucket
from tests.support.emulators import MotoServer
from tests.support.service import Tenant

from .helpers import call, create


def _s3(bucket: S3Bucket, name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "storage_type": "s3", "connection_config": bucket.connection_config,
            **extra}


def _listed(tenant: Tenant, key: str | None = None) -> list[tuple[str | None, str, bool]]:
    answer = call(tenant, "GET", "/v1/storage/configs", key)
    assert answer.status_code == 200, answer.text
    assert answer.json()["next_cursor"] is None
    return [(c["name"], c["storage_type"], c["is_default"]) for c in answer.json()["items"]]


def _audit(tenant: Tenant, operation: str) -> list[tuple[bool, str]]:
    answer = call(tenant, "GET", "/v1/audit", params={"operation": operation, "limit": 100})
    return [(row["success"], row["detail"]) for row in answer.json()["items"]]


def test_a_named_config_is_created_listed_renamed_made_default_and_guarded(
        tenant: Tenant, moto_server: MotoServer) -> None:
    first, second = S3Bucket(moto_server), S3Bucket(moto_server)
    made = create(tenant, _s3(first, "eu-archive"))
    assert made.status_code == 201, made.text
    config = made.json()
    assert re.fullmatch(r"sc_[0-9a-f]{32}", config["storage_config_id"])
    assert config["storage_config_id"] == f"sc_{uuid.UUID(config['id']).hex}"
    assert (config["name"], config["is_default"], config["is_active"]) == (
        "eu-archive", False, False)
    assert (config["region"], config["declared_region"], config["region_verified"]) == (
        "us-east-1", "us-east-1", True)
    assert config["secrets_set"] == ["secret_access_key"]
    sc = config["storage_config_id"]
    assert _listed(tenant) == [(None, "default", True), ("eu-archive", "s3", False)]
    assert _listed(tenant, tenant.key("compliance")) == _listed(tenant)
    assert call(tenant, "GET", f"/v1/storage/configs/{sc}").json() == config

    renamed = call(tenant, "PUT", f"/v1/storage/configs/{sc}", json={"name": "archive"})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["name"] == "archive"

    default = call(tenant, "POST", f"/v1/storage/configs/{sc}/default")
    assert default.status_code == 200, default.text
    assert default.json()["is_default"] is True
    # The single-configuration route shows the default; the old unnamed one is retired.
    assert call(tenant, "GET", "/v1/storage/config").json()["id"] == config["id"]
    assert _listed(tenant) == [("archive", "s3", True)]

    with tenant.client() as client:
        pointer = client.memory.set(scope="team", scope_ref="t1", key="k", value="in s3")
    prefix = config["prefix"] + "/"
    assert [k for k in first.keys(prefix) if "/memories/" in f"/{k}"] != []
    with Session(tenant.stack.engine) as session:
        assert session.scalar(select(MemoryPointer.storage_config_id).where(
            MemoryPointer.id == uuid.UUID(pointer.id))) == uuid.UUID(config["id"])

    refused = call(tenant, "DELETE", f"/v1/storage/configs/{sc}")
    assert refused.status_code == 409
    assert refused.json()["problem"] == "is_default"

    other = create(tenant, _s3(second, "second", make_default=True)).json()
    assert other["is_default"] is True
    assert _listed(tenant) == [("second", "s3", True), ("archive", "s3", False)]
    in_use = call(tenant, "DELETE", f"/v1/storage/configs/{sc}")
    assert in_use.status_code == 409
    assert in_use.json()["detail"] == (
        "1 memory and 0 events still live in this storage configuration; delete or erase "
        "them first (they stay readable where they are)")
    assert (in_use.json()["pointers"], in_use.json()["events"]) == (1, 0)
    with tenant.client() as client:  # still read from where it was written
        assert client.memory.get(scope="team", scope_ref="t1", key="k").value == "in s3"
        client.memory.delete(scope="team", scope_ref="t1", key="k")
    gone = call(tenant, "DELETE", f"/v1/storage/configs/{sc}")
    assert gone.status_code == 204, gone.text
    assert _listed(tenant) == [("second", "s3", True)]
    assert call(tenant, "GET", f"/v1/storage/configs/{sc}").status_code == 404

    assert [ok for ok, _ in _audit(tenant, "storage_config_create")] == [True, True]
    assert [ok for ok, _ in _audit(tenant, "storage_config_delete")] == [False, False, True]
    assert [ok for ok, _ in _audit(tenant, "storage_config_default")] == [True]
    assert [ok for ok, _ in _audit(tenant, "storage_config_update")] == [True]
    texts = " ".join(d for op in ("storage_config_create", "storage_config_read")
                     for _, d in _audit(tenant, op))
    assert first.connection_config["secret_access_key"] not in texts


def test_names_ids_roles_and_tenants_are_checked(tenant: Tenant, moto_server: MotoServer,
                                                 ) -> None:
    bucket = S3Bucket(moto_server)
    sc = create(tenant, _s3(bucket, "main")).json()["storage_config_id"]
    twin = create(tenant, _s3(bucket, "MAIN"))
    assert twin.status_code == 409
    assert twin.json()["detail"] == ("a storage configuration is already named 'MAIN'; "
                                     "choose another name")
    bad = call(tenant, "GET", "/v1/storage/configs/abc123")
    assert bad.status_code == 422
    assert bad.json()["detail"] == (
        "'abc123' is not a storage config id: they look like 'sc_' followed by 32 hex digits "
        "(see GET /v1/storage/configs)")
    unknown = f"sc_{uuid.uuid4().hex}"
    assert call(tenant, "GET", f"/v1/storage/configs/{unknown}").json()["detail"] == (
        f"no storage configuration {unknown}")
    other = tenant.stack.new_tenant()
    for method, path in (("GET", f"/v1/storage/configs/{sc}"),
                         ("POST", f"/v1/storage/configs/{sc}/default"),
                         ("DELETE", f"/v1/storage/configs/{sc}")):
        assert call(other, method, path).status_code == 404
    assert _listed(other) == [(None, "default", True)]
    agent = tenant.key("agent")
    denied = create(tenant, _s3(bucket, "by-agent"), key=agent)
    assert denied.status_code == 403
    assert call(tenant, "GET", "/v1/storage/configs", agent).status_code == 403
    no_name = call(tenant, "POST", "/v1/storage/configs",
                   json={"storage_type": "s3", "connection_config": bucket.connection_config})
    assert no_name.status_code == 422
    assert no_name.json()["detail"] == "body.s3.name: this field is required"
    assert call(tenant, "PUT", f"/v1/storage/configs/{sc}",
                json={"name": "x", "bucket": "other"}).status_code == 422
    assert [n for n, _, _ in _listed(tenant)] == [None, "main"]


def test_a_retried_create_with_the_same_idempotency_key_answers_the_first(
        tenant: Tenant, moto_server: MotoServer) -> None:
    bucket = S3Bucket(moto_server)
    headers = {"Idempotency-Key": f"create-{uuid.uuid4()}"}
    first = create(tenant, _s3(bucket, "once"), headers=headers)
    again = create(tenant, _s3(bucket, "once"), headers=headers)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert _listed(tenant) == [(None, "default", True), ("once", "s3", False)]


def test_a_declared_region_other_than_the_buckets_is_refused(tenant: Tenant,
                                                             moto_server: MotoServer) -> None:
    bucket = S3Bucket(moto_server)
    body = _s3(bucket, "eu")
    body["connection_config"] = {**bucket.connection_config, "region": "eu-west-1"}
    refused = create(tenant, body)
    assert refused.status_code == 422
    assert refused.json()["problem"] == "region_mismatch"
    assert refused.json()["detail"] == (
        "the bucket is in region 'us-east-1' but the configuration declares region "
        "'eu-west-1'; nothing was saved — declare the bucket's real region, or choose a "
        "bucket in 'eu-west-1'")
    assert (refused.json()["declared_region"], refused.json()["bucket_region"]) == (
        "eu-west-1", "us-east-1")
    put = call(tenant, "PUT", "/v1/storage/config",
               json={"storage_type": "s3", "connection_config": body["connection_config"]})
    assert put.status_code == 422
    assert put.json()["problem"] == "region_mismatch"
    assert _listed(tenant) == [(None, "default", True)]
    assert [ok for ok, _ in _audit(tenant, "storage_config_create")] == [False]
