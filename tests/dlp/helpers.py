"""What the DLP tests share: secrets to send, and looks at every place one could leak to."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from sqlalchemy import select

from control_plane.db.models import AccessLog
from tests.support.service import Tenant

CARD = "4111 1111 1111 1111"
SSN = "123-45-6789"
PASSWORD = "hunter2-XyZzy"
SECRETS = (CARD, CARD.replace(" ", ""), SSN, PASSWORD)


def set_policy(tenant: Tenant, mode: str, kinds: list[str] | None = None) -> dict[str, Any]:
    with tenant.stack.http(tenant.admin_key) as http:
        body: dict[str, Any] = {"mode": mode}
        if kinds is not None:
            body["kinds"] = kinds
        answer = http.put("/v1/dlp/policy", json=body)
        assert answer.status_code == 200, answer.text
        result: dict[str, Any] = answer.json()
        return result


def audit_details(tenant: Tenant) -> list[str]:
    """Every audit row's detail of the tenant, straight from the database."""
    with tenant.stack.engine.connect() as conn:
        rows = conn.execute(select(AccessLog.operation, AccessLog.detail)
                            .where(AccessLog.tenant_id == tenant.id)).all()
    return [f"{op} {detail}" for op, detail in rows]


def bucket_bytes(tenant: Tenant) -> bytes:
    return b"".join(p.read_bytes() for p in tenant.objects())


def assert_nowhere(tenant: Tenant, *texts: str) -> None:
    """No secret in the audit table, the bucket's bytes or the given texts (answers, logs)."""
    rows = "\n".join(audit_details(tenant))
    stored = bucket_bytes(tenant)
    for secret in SECRETS:
        assert secret not in rows
        assert secret.encode() not in stored
        for t in texts:
            assert secret not in t, f"{secret!r} in {t!r}"


def refused(answer: httpx.Response, kinds: list[str], detail: str) -> None:
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body == {"error": "sensitive_data", "detail": detail, "kinds": kinds}


def new_ref() -> str:
    return f"u-{uuid.uuid4().hex[:8]}"
