"""The archive tier on the local bucket through a live server, on SQLite and PostgreSQL:
objects move to the colder class first and the rows record it after; reads of archived
memories and events still verify; runs are idempotent and survive a crash between the two
steps; a write of a new version starts over in the default class; nothing crosses tenants;
every item is audited."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from control_plane.archive import service as archive
from control_plane.db.models import AccessLog, MemoryEvent, MemoryPointer
from control_plane.errors import InvalidInput
from control_plane.plane.data_plane import no_faults
from tests.support.service import SimulatedCrash, Tenant


def _put(tenant: Tenant, key: str, value: Any) -> dict[str, Any]:
    with tenant.stack.http(tenant.admin_key) as http:
        answer = http.put(f"/v1/memories/user/u-1/{key}", json={"value": value})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _get(tenant: Tenant, key: str) -> dict[str, Any]:
    with tenant.stack.http(tenant.admin_key) as http:
        answer = http.get(f"/v1/memories/user/u-1/{key}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _pointer(tenant: Tenant, pointer_id: str) -> MemoryPointer:
    with Session(tenant.stack.engine) as session:
        found = session.get(MemoryPointer, uuid.UUID(pointer_id))
        assert found is not None
        return found


def _archive(tenant: Tenant, pointer_ids: list[str] = (),  # type: ignore[assignment]
             event_ids: list[str] = (), storage_class: str | None = None,  # type: ignore[assignment]
             on: uuid.UUID | None = None) -> archive.ArchiveReport:
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        return archive.archive(session, runtime.plane, on or tenant.id,
                               pointer_ids=[uuid.UUID(i) for i in pointer_ids],
                               event_ids=[uuid.UUID(i) for i in event_ids],
                               storage_class=storage_class)


def _class_on_disk(tenant: Tenant, path: str) -> str:
    adapter = tenant.stack.runtime.plane.default_adapter
    return str(adapter.head(path).storage_class)


def _archive_audit(tenant: Tenant) -> list[tuple[str | None, bool, str, str]]:
    with Session(tenant.stack.engine) as session:
        rows = session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == tenant.id, AccessLog.operation == "archive")
            .order_by(AccessLog.id)).all()
        return [(str(r.pointer_id or r.event_id), r.success, r.detail, r.accessor_id)
                for r in rows]


@pytest.fixture
def checkpoint(tenant: Tenant) -> Iterator[Callable[[Callable[[str], None]], None]]:
    plane = tenant.stack.runtime.plane

    def install(hook: Callable[[str], None]) -> None:
        plane.checkpoint = hook

    yield install
    plane.checkpoint = no_faults


def test_an_archived_memory_reads_back_verified_and_shows_its_class(tenant: Tenant) -> None:
    written = _put(tenant, "prefs", {"language": "fr", "tone": "brief"})
    assert written["storage_class"] is None

    report = _archive(tenant, [written["id"]])

    assert (report.archived, report.skipped, report.not_archivable, report.failed,
            report.not_found) == (1, 0, 0, 0, 0)
    assert report.storage_classes == {"archive": 1}
    assert _class_on_disk(tenant, written["storage_path"]) == "archive"
    read = _get(tenant, "prefs")
    assert read["value"] == {"language": "fr", "tone": "brief"}
    assert read["pointer"] == {**written, "storage_class": "archive"}
    with tenant.stack.http(tenant.admin_key) as http:
        listed = http.get("/v1/pointers").json()["items"]
    assert [(p["key"], p["storage_class"]) for p in listed] == [("prefs", "archive")]
    assert _archive_audit(tenant) == [(written["id"], True, "pointer to archive", "archive")]


def test_archiving_again_skips_and_a_colder_class_moves_on(tenant: Tenant) -> None:
    written = _put(tenant, "k", [1, 2, 3])
    assert archive.archive_pointers(
        tenant.stack.runtime.sessions(), tenant.stack.runtime.plane, tenant.id,
        [uuid.UUID(written["id"])]) == 1

    again = _archive(tenant, [written["id"]])
    assert (again.archived, again.skipped) == (0, 1)
    colder = _archive(tenant, [written["id"]], storage_class="cold")
    assert (colder.archived, colder.skipped) == (1, 0)
    assert _pointer(tenant, written["id"]).storage_class == "cold"
    assert _class_on_disk(tenant, written["storage_path"]) == "cold"
    assert _get(tenant, "k")["value"] == [1, 2, 3]
    assert [row[2] for row in _archive_audit(tenant)] == ["pointer to archive",
                                                          "pointer to cold"]


def test_a_new_version_starts_in_the_default_class(tenant: Tenant) -> None:
    first = _put(tenant, "k", "v1")
    _archive(tenant, [first["id"]])
    second = _put(tenant, "k", "v2")
    assert second["storage_class"] is None
    assert second["storage_path"] != first["storage_path"]
    assert _class_on_disk(tenant, second["storage_path"]) == "standard"
    assert _pointer(tenant, first["id"]).storage_class is None


def test_a_crash_between_the_move_and_the_record_under_claims_then_a_rerun_records(
        tenant: Tenant, checkpoint: Callable[[Callable[[str], None]], None]) -> None:
    written = _put(tenant, "k", {"a": 1})

    def crash(step: str) -> None:
        if step == "archive:after_move":
            raise SimulatedCrash(step)

    checkpoint(crash)
    with pytest.raises(SimulatedCrash):
        _archive(tenant, [written["id"]])
    checkpoint(no_faults)

    assert _class_on_disk(tenant, written["storage_path"]) == "archive"
    assert _pointer(tenant, written["id"]).storage_class is None  # never more than the object
    assert _archive_audit(tenant) == []

    rerun = _archive(tenant, [written["id"]])
    assert (rerun.archived, rerun.skipped) == (1, 0)
    assert _pointer(tenant, written["id"]).storage_class == "archive"
    assert _get(tenant, "k")["value"] == {"a": 1}


def test_a_memory_rewritten_while_it_moves_is_not_marked(
        tenant: Tenant, checkpoint: Callable[[Callable[[str], None]], None]) -> None:
    first = _put(tenant, "k", "old")
    rewritten: list[dict[str, Any]] = []

    def rewrite(step: str) -> None:
        if step == "archive:after_move":
            rewritten.append(_put(tenant, "k", "new"))

    checkpoint(rewrite)
    report = _archive(tenant, [first["id"]])

    assert (report.archived, report.not_archivable) == (0, 1)
    pointer = _pointer(tenant, first["id"])
    assert (pointer.storage_path, pointer.storage_class) == (rewritten[0]["storage_path"], None)
    adapter = tenant.stack.runtime.plane.default_adapter
    assert [i.path for i in adapter.list(first["storage_path"])] == []  # stays deleted
    assert _archive_audit(tenant) == [
        (first["id"], False, "pointer not archived: changed meanwhile", "archive")]
    assert _get(tenant, "k")["value"] == "new"


def test_an_archived_event_reads_back_verified(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        created = http.post("/v1/events", json={
            "scope": "entity", "scope_ref": "ent_acme", "kind": "call_summary",
            "body": "## Call\n- ROAS target 4.", "source": "call"}).json()
        assert created["storage_class"] is None

        report = _archive(tenant, event_ids=[created["id"]], storage_class="cold")
        read = http.get(f"/v1/events/{created['id']}")

    assert (report.archived, report.storage_classes) == (1, {"cold": 1})
    assert read.status_code == 200, read.text
    assert read.json() == {**created, "storage_class": "cold", "body": "## Call\n- ROAS target 4."}
    with Session(tenant.stack.engine) as session:
        event = session.get(MemoryEvent, uuid.UUID(created["id"]))
        assert event is not None and event.storage_class == "cold"
    assert _class_on_disk(tenant, created["storage_path"]) == "cold"
    assert _archive_audit(tenant) == [(created["id"], True, "event to cold", "archive")]


def test_another_tenants_ids_touch_nothing(tenant: Tenant) -> None:
    written = _put(tenant, "k", "mine")
    other = tenant.stack.new_tenant()

    report = _archive(tenant, [written["id"]], on=other.id)

    assert (report.archived, report.not_found) == (0, 1)
    assert _pointer(tenant, written["id"]).storage_class is None
    assert _class_on_disk(tenant, written["storage_path"]) == "standard"
    assert _archive_audit(tenant) == [] and _archive_audit(other) == []


def test_an_unknown_class_is_refused_before_anything_moves(tenant: Tenant) -> None:
    written = _put(tenant, "k", "v")
    with pytest.raises(InvalidInput) as info:
        _archive(tenant, [written["id"]], storage_class="GLACIER")
    assert str(info.value) == ("unknown storage class 'GLACIER'; use one of standard, archive, "
                               "cold, standard, archive, cold")
    assert _pointer(tenant, written["id"]).storage_class is None
    assert _class_on_disk(tenant, written["storage_path"]) == "standard"


def test_deleting_an_archived_memory_removes_its_class_record(tenant: Tenant) -> None:
    written = _put(tenant, "k", "v")
    _archive(tenant, [written["id"]])
    adapter = tenant.stack.runtime.plane.default_adapter
    record = adapter.inner.root / ".memplane-class" / written["storage_path"]  # type: ignore[attr-defined]
    assert record.read_text() == "archive"
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.delete("/v1/memories/user/u-1/k").status_code in (200, 204)
    assert not record.exists()
    assert tenant.objects() == []
