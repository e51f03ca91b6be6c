"""What deploy/ gives an operator who changes nothing is the safe choice.

Helm chart, rendered with only what it cannot guess (the database URL, the KMS key, the
bucket):
secrets generated into its Secret, a NetworkPolicy, no service-account token, a required
/metrics token the scrapes send, the bootstrap admin key never in a pod's log, no private
storage endpoints. Compose file: no secret in it, no stand-in port published, the APIs on
loopback only, no private storage endpoints.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import re
from typing import Any

import yaml

from control_plane.settings import Settings
from control_plane.signing import random_bytes_in, signing_key
from storage_adapters.netguard import parse_entries
from tests.deploy.test_deploy import DEPLOY, compose_value, containers, render

MINIMAL = {"secrets": {"values": {
    "MEMPLANE_DATABASE_URL": "postgresql+psycopg://memplane:pw@postgres:5432/memplane"}},
    "kek": {"awsKeyId": "alias/memplane"}, "defaultBucketUrl": "s3://memplane-default/memplane"}
GENERATED = ("MEMPLANE_SERVER_KEY", "MEMPLANE_RECEIPT_SIGNING_KEY", "MEMPLANE_ADMIN_KEY",
             "MEMPLANE_METRICS_TOKEN")
PRIVATE = [ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.168.0.0/16", "fc00::/7", "fe80::/10", "::1/128")]
WORKLOADS = {"Deployment", "Job", "CronJob"}


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc["spec"]
    if doc["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]  # type: ignore[no-any-return]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container["env"]}


def allowed(entries: str) -> list[str]:
    """MEMPLANE_ALLOWED_ENDPOINTS as the server reads it."""
    return Settings(allowed_endpoints=entries).allowed_endpoints


def secret_data(docs: list[dict[str, Any]]) -> dict[str, str]:
    [secret] = by_kind(docs, "Secret").values()
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


# Helm -------------------------------------------------------------------------------------

def test_chart_generates_every_secret_into_its_secret_and_only_there() -> None:
    docs = render(MINIMAL)
    data = secret_data(docs)
    assert sorted(data) == sorted(["MEMPLANE_DATABASE_URL", *GENERATED])
    assert random_bytes_in(data["MEMPLANE_SERVER_KEY"]) == 48
    assert len(base64.b64decode(data["MEMPLANE_RECEIPT_SIGNING_KEY"])) == 32
    assert re.fullmatch(r"mp_[A-Za-z0-9]{43}", data["MEMPLANE_ADMIN_KEY"])
    assert re.fullmatch(r"[A-Za-z0-9]{43}", data["MEMPLANE_METRICS_TOKEN"])
    # What the chart generated is a configuration the server starts with.
    settings = Settings(**{k.removeprefix("MEMPLANE_").lower(): v for k, v in data.items()})
    assert len(signing_key(settings).public_raw) == 32
    # Random per install (an upgrade reads them back from the Secret: lookup)...
    again = secret_data(render(MINIMAL))
    assert [again[k] != data[k] for k in GENERATED] == [True] * 4
    # ...and never in a ConfigMap, an environment value or anywhere else in the manifests.
    assert "ConfigMap" not in {d["kind"] for d in docs}
    others = json.dumps([d for d in docs if d["kind"] != "Secret"])
    assert [k for k in GENERATED if data[k] in others] == []
    for doc in docs:
        if doc["kind"] in WORKLOADS:
            for container in containers(doc):
                env = env_of(container)
                assert [env[k]["valueFrom"]["secretKeyRef"]["name"] for k in GENERATED] == \
                    ["memplane-secrets"] * 4
    # Values the operator gives are used as given.
    given = json.loads(json.dumps(MINIMAL))
    given["secrets"]["values"]["MEMPLANE_ADMIN_KEY"] = "mp_" + "k7" * 20
    assert secret_data(render(given))["MEMPLANE_ADMIN_KEY"] == "mp_" + "k7" * 20


def test_chart_has_a_network_policy_by_default() -> None:
    policies = by_kind(render(MINIMAL), "NetworkPolicy")
    release = {"app.kubernetes.io/name": "memplane", "app.kubernetes.io/instance": "memplane"}
    assert policies["memplane"]["spec"] == {
        "podSelector": {"matchLabels": release},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [],
        "egress": [
            {"to": [{"namespaceSelector": {},
                     "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
             "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]},
            {"ports": [{"port": 5432, "protocol": "TCP"}]},
            {"ports": [{"port": 443, "protocol": "TCP"}],
             "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [
                        "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
                        "172.16.0.0/12", "192.168.0.0/16"]}},
                    {"ipBlock": {"cidr": "::/0", "except": ["fc00::/7", "fe80::/10",
                                                            "::1/128"]}}]},
        ],
    }
    for component, port in (("api", 8080), ("worker", 9090)):
        assert policies[f"memplane-{component}"]["spec"] == {
            "podSelector": {"matchLabels": {**release,
                                            "app.kubernetes.io/component": component}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}],
                         "ports": [{"port": port, "protocol": "TCP"}]}],
        }
    assert set(policies) == {"memplane", "memplane-api", "memplane-worker"}


def test_network_policy_peers_and_destinations_are_configurable() -> None:
    ingress_ns = {"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "ingress-nginx"}}}
    database = [{"ipBlock": {"cidr": "10.0.12.0/24"}}]
    values = {**MINIMAL, "networkPolicy": {
        "apiFrom": [ingress_ns], "metricsFrom": [],
        "egress": {"database": {"to": database, "ports": [6432]}}}}
    policies = by_kind(render(values), "NetworkPolicy")
    assert policies["memplane-api"]["spec"]["ingress"] == [
        {"from": [ingress_ns], "ports": [{"port": 8080, "protocol": "TCP"}]}]
    # No peers is no one, never "everyone" (an empty `from` would be).
    assert policies["memplane-worker"]["spec"]["ingress"] == []
    assert policies["memplane"]["spec"]["egress"][1] == {
        "ports": [{"port": 6432, "protocol": "TCP"}], "to": database}
    off = render({**MINIMAL, "networkPolicy": {"enabled": False}})
    assert "NetworkPolicy" not in {d["kind"] for d in off}


def test_pods_mount_no_service_account_token() -> None:
    docs = render(MINIMAL)
    [account] = by_kind(docs, "ServiceAccount").values()
    assert account["metadata"]["name"] == "memplane"
    assert account["automountServiceAccountToken"] is False
    accounts = {}
    for doc in docs:
        if doc["kind"] in WORKLOADS:
            spec = pod_spec(doc)
            assert spec["automountServiceAccountToken"] is False, doc["metadata"]["name"]
            accounts[doc["metadata"]["name"]] = spec.get("serviceAccountName")
    # The migrations hook runs before the chart's account exists: the namespace's default.
    assert accounts == {"memplane-api": "memplane", "memplane-worker": "memplane",
                        "memplane-reconcile": "memplane", "memplane-verify": "memplane",
                        "memplane-audit-verify": "memplane", "memplane-migrations": None}


def test_metrics_need_the_generated_token_and_the_scrapes_send_it() -> None:
    docs = render({**MINIMAL, "serviceMonitor": {"enabled": True}})
    assert "MEMPLANE_METRICS_TOKEN" in secret_data(docs)
    for doc in docs:
        if doc["kind"] in WORKLOADS:
            for container in containers(doc):
                assert env_of(container)["MEMPLANE_METRICS_TOKEN"]["valueFrom"] == {
                    "secretKeyRef": {"name": "memplane-secrets", "key": "MEMPLANE_METRICS_TOKEN",
                                     "optional": False}}
    monitors = by_kind(docs, "ServiceMonitor")
    assert [m["spec"]["endpoints"][0]["authorization"] for m in monitors.values()] == [
        {"type": "Bearer", "credentials": {"name": "memplane-secrets",
                                           "key": "MEMPLANE_METRICS_TOKEN"}}] * 2


def test_a_generated_bootstrap_key_goes_to_a_file_not_to_the_log() -> None:
    for doc in render({**MINIMAL, "secrets": {"existingSecret": "ops-memplane"}}):
        if doc["kind"] not in WORKLOADS:
            continue
        for container in containers(doc):
            env = env_of(container)
            assert env["MEMPLANE_BOOTSTRAP_KEY_FILE"] == {
                "name": "MEMPLANE_BOOTSTRAP_KEY_FILE",
                "value": "/var/lib/memplane/bootstrap-admin.key"}
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            assert mounts["/var/lib/memplane"] == "data"  # a writable volume of the pod
            assert env["MEMPLANE_ADMIN_KEY"]["valueFrom"]["secretKeyRef"]["name"] == \
                "ops-memplane"


def test_chart_lets_tenants_reach_no_private_address() -> None:
    for doc in render(MINIMAL):
        if doc["kind"] in WORKLOADS:
            for container in containers(doc):
                entries = env_of(container).get("MEMPLANE_ALLOWED_ENDPOINTS", {}).get("value", "")
                _, networks = parse_entries(allowed(entries))
                assert [n for n in networks if any(n.overlaps(p) for p in PRIVATE)] == []


# Compose ----------------------------------------------------------------------------------

def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())  # type: ignore[no-any-return]


def test_compose_holds_no_secret_and_generates_them_at_first_start() -> None:
    services = compose()["services"]
    assert services["secrets"]["command"] == [
        "keys", "generate", "--dir", "/var/lib/memplane/secrets"]
    assert services["secrets"]["volumes"] == ["secrets:/var/lib/memplane/secrets"]
    for name, service in services.items():
        if "environment" not in service or not service["image"].startswith("memplane"):
            continue
        env = service["environment"]
        assert [k for k in GENERATED if k in env] == [], name
        assert {k: env[f"{k}_FILE"] for k in GENERATED} == {
            "MEMPLANE_SERVER_KEY": "/var/lib/memplane/secrets/server.key",
            "MEMPLANE_RECEIPT_SIGNING_KEY": "/var/lib/memplane/secrets/receipt-signing.key",
            "MEMPLANE_ADMIN_KEY": "/var/lib/memplane/secrets/admin.key",
            "MEMPLANE_METRICS_TOKEN": "/var/lib/memplane/secrets/metrics.token"}, name
        assert "secrets:/var/lib/memplane/secrets:ro" in service["volumes"], name
    # Nothing in the file looks like a key: no long hex or base64 run.
    text = (DEPLOY / "compose.yaml").read_text()
    assert re.findall(r"\b[0-9a-fA-F]{32,}\b|[A-Za-z0-9+/]{40,}={0,2}", text) == []


def test_compose_publishes_no_stand_in_and_binds_the_apis_to_loopback() -> None:
    services = compose()["services"]
    for name in ("s3", "gcs", "azurite", "buckets"):
        assert services[name]["profiles"] == ["dev"], name
        assert "ports" not in services[name], name
    published = {name: s["ports"] for name, s in services.items() if "ports" in s}
    assert published == {"api-1": ["127.0.0.1:8081:8080"], "api-2": ["127.0.0.1:8082:8080"]}


def test_compose_lets_tenants_reach_no_private_address() -> None:
    for name, service in compose()["services"].items():
        entries = service.get("environment", {}).get("MEMPLANE_ALLOWED_ENDPOINTS")
        if entries is None:
            continue
        assert "ENDPOINTS" in str(entries)  # only what the operator's shell gives
        assert allowed(compose_value(entries, {})) == [], name
