"""An erasure leaves no vector, segment or indexed text of the subject in the bucket —
listed with the vendor client (boto3) on the S3 emulator — and search stops finding the
subject at once; the bystander's memories stay searchable. Export states that vectors are
derived data and leaves them out."""

from __future__ import annotations

import json
import uuid
import zipfile
from pathlib import Path
from typing import Any

from sqlalchemy import select

from control_plane.db.models import MemoryPointer, SearchSegment
from control_plane.search import parts
from tests.search.test_search_api import _index, _put, _search
from tests.support.emulators import MotoServer
from tests.support.service import Tenant


def _listing(moto: MotoServer, bucket: str) -> list[str]:
    pages = moto.client().get_paginator("list_object_versions").paginate(Bucket=bucket)
    return sorted(v["Key"] for page in pages
                  for v in page.get("Versions", []) + page.get("DeleteMarkers", []))


def test_erasure_leaves_no_vector_or_segment_of_the_subject(
        tenant: Tenant, moto_server: MotoServer, s3_config: dict[str, Any]) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        configured = http.put("/v1/storage/config", json={"storage_type": "s3",
                                                         "connection_config": s3_config})
        assert configured.status_code == 200, configured.text
        alice = [
            _put(http, "user", "alice", "pet", "Alice's dog Biscuit fears thunder."),
            _put(http, "team", "t-1", "alice-pet", "Alice walks Biscuit the dog daily.",
                 user_id="alice"),
            http.post("/v1/entries", json={"scope": "team", "scope_ref": "t-1",
                                           "title": "Alice", "user_id": "alice",
                                           "summary": "Alice's dog Biscuit review."}).json(),
        ]
        bob = _put(http, "team", "t-1", "bob-pet", "Bob's dog Rex loves thunder.",
                   user_id="bob")
        _index(tenant)
        before = _search(http, "dog", limit=10)
        with tenant.client() as officer:
            done = officer.jobs.wait(officer.memory.erase_user("alice").id)
        after = _search(http, "dog Biscuit thunder", limit=10)

    assert {r["pointer_id"] for r in before["results"]} == {p["id"] for p in alice + [bob]}
    assert done.state == "completed"
    assert [r["pointer_id"] for r in after["results"]] == [bob["id"]]
    listed = _listing(moto_server, s3_config["bucket"])
    alice_ids = {uuid.UUID(p["id"]) for p in alice}
    assert not [k for k in listed if "/memories/user/alice/" in k]
    assert not [k for k in listed if any(i.hex in k for i in alice_ids)]
    vectors = [k for k in listed if k.endswith(".vec")]
    assert len(vectors) == 1 and vectors[0].endswith("/" + bob["storage_path"] + ".vec")
    segments = [k for k in listed if k.endswith(".seg")]
    assert len(segments) == 1 and "/memories/team/t-1/@search/" in segments[0]
    with tenant.stack.engine.connect() as conn:
        kept = conn.execute(select(SearchSegment.id, SearchSegment.storage_path,
                                   SearchSegment.kind)
                            .where(SearchSegment.tenant_id == tenant.id)).all()
        pointers = conn.scalars(select(MemoryPointer.id)
                                .where(MemoryPointer.tenant_id == tenant.id)).all()
    assert [(r.kind, segments[0].endswith("/" + r.storage_path)) for r in kept] == [
        ("snapshot", True)]
    blob = moto_server.client().get_object(Bucket=s3_config["bucket"],
                                           Key=segments[0])["Body"].read()
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:  # bob's row is in a part sealed under bob's key
        rows = parts.open_rows(session, runtime.plane, tenant.id, kept[0].storage_path,
                               kept[0].id, blob)
    assert rows.ids == [uuid.UUID(bob["id"])]
    assert "Alice" not in " ".join(rows.texts) and "Biscuit" not in " ".join(rows.texts)
    assert pointers == [uuid.UUID(bob["id"])]


def test_export_says_vectors_are_derived_and_left_out(tenant: Tenant,
                                                        tmp_path: Path) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        _put(http, "user", "carol", "pet", "Carol's cat Pixel.")
        _index(tenant)
    with tenant.client() as officer:
        job = officer.memory.export(user_id="carol")
        assert officer.jobs.wait(job.id).state == "completed"
        officer.exports.download(job.id, tmp_path / "export.zip")
    with zipfile.ZipFile(tmp_path / "export.zip") as archive:
        manifest = json.loads(archive.read("manifest.json"))
        names = archive.namelist()
    assert [n for n in manifest["not_exported"] if n["what"] == "embeddings"] == [
        {"what": "embeddings", "why": "derived vectors (and the search snapshots holding "
                                      "them), recomputable from the exported values"}]
    assert len(manifest["items"]) == 1
    assert not [n for n in names if n.endswith((".vec", ".seg"))]
