"""``memplane storage configs …`` and ``memplane agents …``: the operator commands, on the
embedded default's database (and PostgreSQL), through the same services as the API."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.cli.test_events_entries import _run, env  # noqa: F401  (the env fixture)
from tests.support.buckets import S3Bucket
from tests.support.emulators import MotoServer


def _lines(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_configs_and_agents_from_the_command_line(env: dict[str, str],  # noqa: F811
                                                  moto_server: MotoServer,
                                                  tmp_path: Path) -> None:
    env = {**env, "MEMPLANE_ALLOWED_ENDPOINTS": '["127.0.0.1/32"]'}
    bucket = S3Bucket(moto_server)
    secret = f"SECRET-{uuid.uuid4().hex}"  # moto accepts any secret
    connection = {**bucket.connection_config, "secret_access_key": secret}
    made = _run(env, "storage", "configs", "create", "archive", "--type", "s3", "--config",
                "-", stdin=json.dumps(connection))
    assert made.exit_code == 0, made.output
    [config] = _lines(made.stdout)
    sc = str(config["storage_config_id"])
    assert secret not in made.output
    listed = _run(env, "storage", "configs", "list")
    assert [(c["name"], c["is_default"]) for c in _lines(listed.stdout)] == [
        (None, True), ("archive", False)]

    agent = _run(env, "agents", "set", "support-bot", "--retention", "90d",
                 "--storage-config", sc)
    assert agent.exit_code == 0, agent.output
    assert _lines(agent.stdout)[0]["memory"] == {"user_memory": {
        "enabled": True, "retention": "90d", "retention_days": 90, "storage_config_id": sc}}
    assert _lines(_run(env, "agents", "get", "support-bot").stdout)[0]["agent_id"] == \
        "support-bot"
    assert [a["agent_id"] for a in _lines(_run(env, "agents", "list").stdout)] == [
        "support-bot"]
    refused = _run(env, "storage", "configs", "delete", sc)
    assert refused.exit_code == 1
    assert "send their user memories to this storage configuration" in refused.output
    assert _run(env, "agents", "delete", "support-bot").exit_code == 0
    default = _run(env, "storage", "configs", "default", sc)
    assert _lines(default.stdout)[0]["is_default"] is True
    bad = _run(env, "agents", "set", "bot", "--retention", "3 months")
    assert bad.exit_code == 2
    assert "retention" in bad.output
