"""The chart cannot lose data or take a typo: it refuses to render without a bucket (or with
one inside the pod), its values.schema.json is closed and names what it refuses, the
workers have probes, NOTES.txt says what to do next, and the production example renders
into manifests the Kubernetes schemas accept. Compose creates its dev bucket only once the
S3 stand-in answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_deploy import CHART, DEPLOY, KUBERNETES_VERSION, VALUES, containers, need
from tests.deploy.test_deploy import render as render_manifests

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
EXAMPLE = DEPLOY / "helm" / "examples" / "production-values.yaml"


def values(**changes: Any) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(VALUES))
    copied.update(changes)
    return copied


def refusal(chart_values: dict[str, Any]) -> str:
    need("helm_python")
    from helm_python.errors import HelmError

    with pytest.raises(HelmError) as refused:
        render_manifests(chart_values)
    return str(refused.value)


@pytest.mark.parametrize(("bucket", "sentence"), [
    ("", "defaultBucketUrl is required: name the bucket memory goes to (e.g. "
         "s3://my-bucket/memplane, gs://…, azure://…); without one each pod would keep memory "
         "in its own emptyDir, lost on restart"),
    ("my-bucket?secret_access_key=Secret-0001",
     'defaultBucketUrl "my-bucket" has no scheme: name an object storage bucket '
     "(s3://my-bucket/memplane, gs://…, azure://…)"),
    ("file:///var/lib/memplane/bucket?fsync=false",
     'defaultBucketUrl "file:///var/lib/memplane/bucket" is inside each pod (an emptyDir, lost '
     "on restart): name an object storage bucket (s3://, gs://, azure://)"),
    ("memory://scratch",
     'defaultBucketUrl "memory://scratch" is inside each pod (an emptyDir, lost on restart): '
     "name an object storage bucket (s3://, gs://, azure://)"),
])
def test_the_chart_refuses_to_render_without_a_bucket_that_outlives_a_pod(
        bucket: str, sentence: str) -> None:
    message = refusal(values(defaultBucketUrl=bucket))
    assert message.endswith(sentence)
    assert "Secret-0001" not in message


@pytest.mark.parametrize(("change", "named"), [
    ({"kek": {"provider": "aws_kms", "awsKeyId": "alias/memplane"}},
     "at '/kek/provider': value must be one of 'aws-kms', 'local'"),
    ({"defaultBucketURL": "s3://typo"}, "additional properties 'defaultBucketURL' not allowed"),
    ({"api": {"replica": 3}}, "at '/api': additional properties 'replica' not allowed"),
    ({"worker": {"replicas": "two"}}, "at '/worker/replicas': got string, want integer"),
    ({"publicUrl": "http://memory.example.com"}, "at '/publicUrl'"),
])
def test_the_values_schema_refuses_a_typo_by_name(change: dict[str, Any], named: str) -> None:
    message = refusal(values(**change))
    assert "values don't meet the specifications of the schema" in message
    assert named in message


def _schema_paths(schema: dict[str, Any], prefix: str = "") -> set[str]:
    paths = set()
    for key, sub in schema.get("properties", {}).items():
        paths.add(prefix + key)
        if sub.get("additionalProperties") is False:
            paths |= _schema_paths(sub, f"{prefix}{key}.")
    return paths


def _value_paths(tree: dict[str, Any], schema: dict[str, Any], prefix: str = "") -> set[str]:
    paths = set()
    for key, value in tree.items():
        paths.add(prefix + key)
        sub = schema.get("properties", {}).get(key, {})
        if isinstance(value, dict) and sub.get("additionalProperties") is False:
            paths |= _value_paths(value, sub, f"{prefix}{key}.")
    return paths


def test_the_schema_is_closed_and_describes_every_value_the_chart_ships() -> None:
    jsonschema = need("jsonschema")
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    assert _value_paths(defaults, SCHEMA) <= _schema_paths(SCHEMA)
    assert SCHEMA["additionalProperties"] is False
    closed = [key for key, sub in SCHEMA["properties"].items()
              if sub.get("type") == "object" and sub.get("additionalProperties") is False]
    assert set(closed) >= {"image", "secrets", "kek", "api", "worker", "schedules",
                           "networkPolicy", "serviceAccount", "serviceMonitor"}
    validator = jsonschema.Draft7Validator(SCHEMA)
    for tree in (defaults, VALUES, yaml.safe_load(EXAMPLE.read_text())):
        assert list(validator.iter_errors(tree)) == []
    typo = [e.message for e in validator.iter_errors({**defaults, "kek": {"provider": "kms"}})]
    assert typo == ["'kms' is not one of ['aws-kms', 'local']"]


def test_workers_have_probes_on_their_metrics_port() -> None:
    [worker] = [d for d in render_manifests(VALUES)
                if d["kind"] == "Deployment" and d["metadata"]["name"] == "memplane-worker"]
    [container] = containers(worker)
    assert container["readinessProbe"]["tcpSocket"] == {"port": "metrics"}
    assert container["livenessProbe"]["tcpSocket"] == {"port": "metrics"}


def test_notes_say_how_to_check_and_reach_the_release() -> None:
    need("helm_python")
    from helm_python import Chart

    chart_values = values(defaultBucketUrl="s3://acme/mp?secret_access_key=Secret-0002")
    with Chart.load(CHART) as chart:
        notes = chart.render(chart_values, name="memplane", namespace="memplane",
                             is_install=True)["memplane/templates/NOTES.txt"]
    assert "  Bucket:   s3://acme/mp\n" in notes and "Secret-0002" not in notes
    assert ("kubectl -n memplane exec deploy/memplane-api -- memplane doctor --processes 5"
            in notes)  # 2 API replicas, 2 workers, a CronJob
    assert "set publicUrl to its\nhttps:// URL" in notes
    with Chart.load(CHART) as chart:
        notes = chart.render(values(publicUrl="https://memory.example.com"), name="memplane",
                             namespace="memplane", is_install=True)["memplane/templates/NOTES.txt"]
    assert "publicUrl" not in notes


def test_the_network_policy_denies_by_default_and_opens_only_the_ports() -> None:
    docs = {(d["kind"], d["metadata"]["name"]): d for d in render_manifests(VALUES)}
    base = docs[("NetworkPolicy", "memplane")]["spec"]
    assert base["policyTypes"] == ["Ingress", "Egress"] and base["ingress"] == []
    assert [sorted(p["port"] for p in rule["ports"]) for rule in base["egress"]] == [
        [53, 53], [5432], [443]]
    api = docs[("NetworkPolicy", "memplane-api")]["spec"]
    assert api["ingress"] == [{"from": [{"podSelector": {}}],
                               "ports": [{"port": 8080, "protocol": "TCP"}]}]
    worker = docs[("NetworkPolicy", "memplane-worker")]["spec"]
    assert worker["ingress"][0]["ports"] == [{"port": 9090, "protocol": "TCP"}]
    shut = values(networkPolicy={**VALUES.get("networkPolicy", {}), "enabled": True,
                                 "apiFrom": []})
    closed = {(d["kind"], d["metadata"]["name"]): d for d in render_manifests(shut)}
    assert closed[("NetworkPolicy", "memplane-api")]["spec"]["ingress"] == []
    off = values(networkPolicy={"enabled": False})
    assert "NetworkPolicy" not in {d["kind"] for d in render_manifests(off)}


def test_the_production_example_renders_into_valid_manifests(tmp_path: Path) -> None:
    validate = need("kubernetes_validate")
    example = yaml.safe_load(EXAMPLE.read_text())
    docs = render_manifests(example)
    checked = 0
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD of the Prometheus Operator
        validate.validate(doc, KUBERNETES_VERSION, strict=True)
        checked += 1
    assert checked == len(docs) - 2
    env = {e["name"]: e.get("value") for d in docs if d["kind"] == "Deployment"
           for c in containers(d) for e in c["env"]}
    assert env["MEMPLANE_DEFAULT_BUCKET_URL"] == example["defaultBucketUrl"]
    assert env["MEMPLANE_PUBLIC_URL"] == "https://memory.example.com"


def test_compose_creates_the_dev_bucket_only_once_the_s3_stand_in_answers() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert services["buckets"]["depends_on"] == {"s3": {"condition": "service_healthy"}}
    check = services["s3"]["healthcheck"]
    assert check["test"][:2] == ["CMD", "python"] and "http://127.0.0.1:5000/moto-api/" in \
        check["test"][3]
    assert check["retries"] * int(check["interval"].rstrip("s")) >= 30
