"""Data residency: a configuration's declared region is checked against the bucket's own
location when it is probed (GCS reports EUROPE-WEST1 where the seed writes europe-west1;
S3 answers get_bucket_location) and shown by the storage health check. Azure's data plane
reports no region (nor does Azurite), so there the region is recorded as declared."""

from __future__ import annotations

from typing import Any

from tests.support.emulators import Azurite, unique_name
from tests.support.service import Tenant

from .helpers import EuropeanGcsServer, call


def _gcs(server: EuropeanGcsServer, region: str) -> dict[str, Any]:
    bucket = unique_name("gcs")
    server.create_bucket(bucket)
    return {"storage_type": "gcs", "connection_config": {**server.config(bucket),
                                                         "region": region}}


def test_the_seeds_gcs_example_with_its_region_is_accepted(
        tenant: Tenant, eu_gcs_server: EuropeanGcsServer) -> None:
    put = call(tenant, "PUT", "/v1/storage/config", json=_gcs(eu_gcs_server, "europe-west1"))
    assert put.status_code == 200, put.text
    config = put.json()
    assert (config["region"], config["declared_region"], config["region_verified"]) == (
        "EUROPE-WEST1", "europe-west1", True)
    assert config["connection_config"]["region"] == "europe-west1"
    health = call(tenant, "GET", "/v1/storage/health").json()
    assert (health["ok"], health["region"], health["declared_region"],
            health["region_verified"], health["storage_config_id"]) == (
        True, "EUROPE-WEST1", "europe-west1", True, config["storage_config_id"])
    assert not [n for n in health["notes"] if "region" in n]
    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="u1", key="k", value="in europe")
        assert client.memory.get(scope="user", scope_ref="u1", key="k").value == "in europe"


def test_a_gcs_bucket_elsewhere_than_declared_is_refused_naming_both(
        tenant: Tenant, eu_gcs_server: EuropeanGcsServer) -> None:
    put = call(tenant, "PUT", "/v1/storage/config", json=_gcs(eu_gcs_server, "us-east1"))
    assert put.status_code == 422
    assert put.json()["detail"] == (
        "the bucket is in region 'EUROPE-WEST1' but the configuration declares region "
        "'us-east1'; nothing was saved — declare the bucket's real region, or choose a "
        "bucket in 'us-east1'")
    assert call(tenant, "GET", "/v1/storage/config").json()["storage_type"] == "default"


def test_azure_records_the_declared_region_as_not_verified(tenant: Tenant,
                                                           azurite_server: Azurite) -> None:
    container = unique_name("az")
    azurite_server.create_bucket(container)
    put = call(tenant, "POST", "/v1/storage/configs", json={
        "name": "azure-eu", "storage_type": "azure", "make_default": True,
        "connection_config": {**azurite_server.config(container), "region": "westeurope"}})
    assert put.status_code == 201, put.text
    config = put.json()
    assert (config["region"], config["declared_region"], config["region_verified"]) == (
        "westeurope", "westeurope", False)
    health = call(tenant, "GET", "/v1/storage/health").json()
    assert (health["ok"], health["region"], health["region_verified"]) == (
        True, "westeurope", False)
    assert ("region 'westeurope' is declared; the azure data plane does not report the "
            "bucket's region, so it is not verified") in health["notes"]


def test_a_malformed_region_is_a_422_sentence(tenant: Tenant,
                                              eu_gcs_server: EuropeanGcsServer) -> None:
    put = call(tenant, "PUT", "/v1/storage/config", json=_gcs(eu_gcs_server, "europe west/1"))
    assert put.status_code == 422
    assert put.json()["detail"].startswith("body.gcs.connection_config.region: ")


def test_each_named_config_has_its_own_health_check(tenant: Tenant,
                                                    eu_gcs_server: EuropeanGcsServer) -> None:
    made = call(tenant, "POST", "/v1/storage/configs",
                json={"name": "eu", **_gcs(eu_gcs_server, "EUROPE-WEST1")})
    assert made.status_code == 201, made.text
    sc = made.json()["storage_config_id"]
    health = call(tenant, "GET", f"/v1/storage/configs/{sc}/health").json()
    assert (health["ok"], health["storage_config_id"], health["storage_type"],
            health["region"], health["region_verified"]) == (
        True, sc, "gcs", "EUROPE-WEST1", True)
    default = call(tenant, "GET", "/v1/storage/health").json()
    assert (default["storage_type"], default["storage_config_id"]) == (
        "default", call(tenant, "GET", "/v1/storage/config").json()["storage_config_id"])
    bad = call(tenant, "GET", "/v1/storage/configs/nope/health")
    assert bad.status_code == 422
    failures = call(tenant, "GET", "/v1/audit", params={"operation": "storage_health"}).json()
    assert [row["success"] for row in failures["items"]] == [True, True, False]
