"""The KMS becomes unreachable mid-traffic (the moto server holding the KEK is stopped):
every request that needs it answers 503 with a sentence, no content is served, no pointer
is marked corrupt, no pointer or audit row claims a write or read that did not happen."""

from __future__ import annotations

import uuid
from pathlib import Path

import boto3
import httpx
from sqlalchemy import func, select

import memplane
from control_plane.db.models import AccessLog, MemoryPointer, SubjectKey
from tests.support.emulators import MOTO_KEY_ID, MOTO_REGION, MOTO_SECRET, MotoServer
from tests.support.service import BOOTSTRAP_KEY, ServerThread, make_settings


def test_kms_unreachable_mid_traffic_gives_503_serves_nothing_and_marks_nothing_corrupt(
        database: str, tmp_path: Path) -> None:
    moto = MotoServer()
    moto.start()
    server: ServerThread | None = None
    clients: list[httpx.Client] = []
    try:
        kms = boto3.client("kms", endpoint_url=moto.endpoint, region_name=MOTO_REGION,
                           aws_access_key_id=MOTO_KEY_ID, aws_secret_access_key=MOTO_SECRET)
        kek = kms.create_key(Description="memplane outage KEK")["KeyMetadata"]["Arn"]
        kms.close()
        settings = make_settings(database, tmp_path, kek_provider="aws-kms",
                                 kek_aws_key_id=kek, kek_aws_region=MOTO_REGION,
                                 kek_aws_endpoint_url=moto.endpoint,
                                 kek_aws_access_key_id=MOTO_KEY_ID,
                                 kek_aws_secret_access_key=MOTO_SECRET)
        server = ServerThread(settings).start()
        runtime = server.app.state.runtime
        base = f"http://127.0.0.1:{server.port}"
        with memplane.Client(base, BOOTSTRAP_KEY) as admin:
            created = admin.tenants.create(name="kms outage")
        tenant_id = uuid.UUID(str(created.tenant.id))
        http = httpx.Client(base_url=base, timeout=60,
                            headers={"Authorization": f"Bearer {created.api_key}"})
        clients.append(http)
        values = {"u1": "first secret", "u2": "second secret", "u3": "third secret"}
        for ref, value in values.items():
            put = http.put(f"/v1/memories/user/{ref}/note", json={"value": value})
            assert put.status_code == 200, put.text
        read = http.get("/v1/memories/user/u1/note")
        assert (read.status_code, read.json()["value"]) == (200, "first secret")

        # Mid-traffic the KMS goes away; no subject key is left in the server's memory.
        moto.stop()
        ring = runtime.plane.keys
        with runtime.sessions() as session:
            ring.cache.forget(list(session.scalars(
                select(SubjectKey.id).where(SubjectKey.tenant_id == tenant_id))))

        answers = [http.get(f"/v1/memories/user/{ref}/note") for ref in values]
        answers.append(http.post("/v1/memories/user/u1/note/append", json={"value": "more"}))
        answers.append(http.put("/v1/memories/user/u4/note", json={"value": "fourth secret"}))
        for n, answer in enumerate(answers):
            assert answer.status_code == 503, answer.text
            verb = "wrap" if n == len(answers) - 1 else "unwrap"  # the new subject's key
            assert answer.json() == {
                "error": "key_unavailable",
                "detail": "the tenant's key-encryption key is unavailable (KMS could not "
                          f"{verb} a subject key: EndpointConnectionError); retry later"}
            for secret in (*values.values(), "fourth secret", "more"):
                assert secret not in answer.text

        with runtime.sessions() as session:
            pointers = {p.scope_ref: (p.sync_status, p.version) for p in session.scalars(
                select(MemoryPointer).where(MemoryPointer.tenant_id == tenant_id))}
            served = session.scalar(select(func.count()).select_from(AccessLog).where(
                AccessLog.tenant_id == tenant_id, AccessLog.operation == "read",
                AccessLog.success.is_(True)))
            refused = session.scalar(select(func.count()).select_from(AccessLog).where(
                AccessLog.tenant_id == tenant_id, AccessLog.operation == "read",
                AccessLog.success.is_(False)))
        # Nothing marked corrupt, the append changed nothing, the new write left no pointer.
        assert pointers == {"u1": ("synced", 1), "u2": ("synced", 1), "u3": ("synced", 1)}
        assert (served, refused) == (1, 3)
    finally:
        for client in clients:
            client.close()
        if server is not None:
            server.stop()
        moto.stop()
