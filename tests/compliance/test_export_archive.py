"""The export archive's ZIP writer, read back by Python's ``zipfile`` and Info-ZIP's
``unzip``; and the export's windows of memories, which open, verify and pack objects side by
side, leaving a missing, tampered or replaced object to the verified read (marked, audited,
listed, never archived). On SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import uuid
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.compliance import export_collect, export_download, export_items, zipwriter
from control_plane.compliance import service as compliance
from control_plane.db.models import AccessLog, Job, MemoryPointer
from control_plane.identity import Actor
from control_plane.job_handlers import JobWorker
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.tenants.service import create_tenant
from tests.support.service import isolated_database, make_settings

SUBJECT = "subject-z"
WHEN = datetime(2026, 11, 30, 13, 45, 58, tzinfo=UTC)


def _written(members: list[tuple[str, bytes]]) -> tuple[bytes, int, str]:
    sink = io.BytesIO()
    writer = zipwriter.ZipWriter(sink, WHEN)
    for name, data in members:
        writer.add_bytes(name, data)
    size, digest = writer.close()
    return sink.getvalue(), size, digest


names = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40)
contents = st.one_of(st.binary(max_size=3000),
                     st.text(max_size=3000).map(str.encode),
                     st.integers(0, 200_000).map(lambda n: os.urandom(n)),
                     st.integers(0, 200_000).map(lambda n: os.urandom(n // 2).hex().encode()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(names, contents), max_size=8, unique_by=lambda m: m[0]))
def test_what_the_writer_writes_reads_back_member_for_member(
        members: list[tuple[str, bytes]]) -> None:
    data, size, digest = _written(members)
    assert (size, digest) == (len(data), hashlib.sha256(data).hexdigest())
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None  # every member's CRC-32 checks
        assert archive.namelist() == [name for name, _ in members]
        for (name, content), info in zip(members, archive.infolist(), strict=True):
            assert archive.read(name) == content
            assert info.file_size == len(content)
            assert info.date_time == (2026, 11, 30, 13, 45, 58)
            assert info.flag_bits & 0x800  # the name is UTF-8


def test_content_deflate_cannot_shrink_is_stored_and_text_is_deflated() -> None:
    noise, text = os.urandom(300_000), os.urandom(150_000).hex().encode()
    small_noise = os.urandom(100)
    data, _, _ = _written([("noise", noise), ("text", text), ("small", small_noise),
                           ("empty", b"")])
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = {i.filename: i for i in archive.infolist()}
    assert info["noise"].compress_type == zipfile.ZIP_STORED
    assert info["noise"].compress_size == len(noise)
    assert info["small"].compress_type == zipfile.ZIP_STORED
    assert info["text"].compress_type == zipfile.ZIP_DEFLATED
    assert info["text"].compress_size < 0.6 * len(text)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:  # deflated past the judged 64 KiB
        assert (archive.read("text"), archive.read("noise")) == (text, noise)
    assert info["empty"].compress_type == zipfile.ZIP_STORED


def test_a_member_packed_a_piece_at_a_time_reads_back(tmp_path: Path) -> None:
    pieces = [os.urandom(50_000).hex().encode() for _ in range(5)] + [b"", b"tail"]
    with open(tmp_path / "packed", "w+b") as packed:
        deflater = zipwriter.Deflater(packed)
        for piece in pieces:
            deflater.write(piece)
        crc, size, compressed = deflater.finish()
        assert (size, compressed) == (sum(map(len, pieces)), packed.tell())
        packed.seek(0)
        sink = io.BytesIO()
        writer = zipwriter.ZipWriter(sink, WHEN)
        writer.add_bytes("first", b"one")
        writer.add_packed_file("big", packed, crc, size, compressed, chunk=7_000)
        writer.close()
    with zipfile.ZipFile(sink) as archive:
        assert archive.testzip() is None
        assert archive.read("big") == b"".join(pieces)
        assert archive.read("first") == b"one"


def test_a_name_twice_is_refused() -> None:
    writer = zipwriter.ZipWriter(io.BytesIO(), WHEN)
    writer.add_bytes("a", b"1")
    with pytest.raises(ValueError, match="already has a member 'a'"):
        writer.add_bytes("a", b"2")


@pytest.mark.skipif(shutil.which("unzip") is None, reason="Info-ZIP unzip is not installed")
def test_more_members_than_the_classic_format_counts_take_zip64_records(
        tmp_path: Path) -> None:
    count = 0xFFFF + 2
    path = tmp_path / "many.zip"
    with open(path, "wb") as sink:
        writer = zipwriter.ZipWriter(sink, WHEN)
        for i in range(count):
            writer.add_bytes(f"m/{i}", str(i).encode())
        writer.close()
    with zipfile.ZipFile(path) as archive:
        assert len(archive.infolist()) == count
        assert archive.read(f"m/{count - 1}") == str(count - 1).encode()
    tested = subprocess.run(["unzip", "-tqq", str(path)], capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr


# -- the export's windows ------------------------------------------------------------------


@pytest.fixture(params=[True, False], ids=["encrypted", "plain"])
def runtime(request: pytest.FixtureRequest, database: str, tmp_path: Path) -> Iterator[Runtime]:
    built = Runtime(make_settings(isolated_database(database, request), tmp_path,
                                  encryption=request.param))
    if database == "sqlite":
        built.migrate()
    try:
        yield built
    finally:
        built.close()


def _fill(runtime: Runtime, n: int, size: int) -> tuple[Actor, dict[str, Any]]:
    with runtime.sessions() as session:
        tenant, _ = create_tenant(session, f"t-{uuid.uuid4().hex[:8]}")
    actor = Actor(tenant.id, "api", "test")
    written: dict[str, Any] = {}
    with runtime.sessions() as session:
        for i in range(n):
            value = {"i": i, "text": os.urandom(size // 2).hex()}
            pointer = memories.set_value(session, runtime.plane, actor,
                                         MemoryAddress.parse(Scope.user, SUBJECT, f"k{i:03}"),
                                         value, MemoryMeta())
            assert isinstance(pointer, MemoryPointer)
            written[str(pointer.id)] = value
    return actor, written


def _export(runtime: Runtime, actor: Actor) -> tuple[dict[str, Any], zipfile.ZipFile]:
    with runtime.sessions() as session:
        queued = compliance.start_export(session, actor, SUBJECT, "json")
    assert JobWorker(runtime.sessions, runtime.plane, runtime.settings).run_once() == queued.id
    with runtime.sessions() as session:
        done = session.get(Job, queued.id)
        assert done is not None and done.state == "completed", done and done.error
        chunks, _ = export_download.download(session, runtime.plane, actor, queued.id)
        archive = zipfile.ZipFile(io.BytesIO(b"".join(chunks)))
    return json.loads(archive.read("manifest.json")), archive


def _pointer(runtime: Runtime, pointer_id: str) -> MemoryPointer:
    with runtime.sessions() as session:
        found = session.get(MemoryPointer, uuid.UUID(pointer_id))
        assert found is not None
        return found


def test_windows_hold_at_most_their_bytes_and_items(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export_items, "WINDOW_BYTES", 100)
    monkeypatch.setattr(export_items, "WINDOW_ITEMS", 3)
    page: list[Any] = [MemoryPointer(content_size=size) for size in
                       (10, 20, 30, 40, 150, 5, 95, 1, 1, 1, 1)]
    sizes = [[p.content_size for p in window] for window in export_items.windows(page)]
    # a window closes before it would pass 100 bytes or 3 items; one larger is alone
    assert sizes == [[10, 20, 30], [40], [150], [5, 95], [1, 1, 1], [1]]


def test_a_page_in_a_cloud_bucket_reads_in_smaller_windows(runtime: Runtime) -> None:
    """Values of a local bucket: windows of ``WINDOW_BYTES``; a page with any value in a
    cloud bucket (its fetched objects are in memory beside the windows):
    ``FAR_WINDOW_BYTES``."""
    mib = 1 << 20
    with runtime.sessions() as session:
        tenant, _ = create_tenant(session, "windows")
        local = runtime.plane.active(session, tenant.id)
        far = type("Far", (), {"adapter": type("S3", (), {"scheme": "s3"})()})()
        targets = runtime.plane._targets  # a stand-in for a configured S3 bucket
        targets[uuid.UUID(int=7)] = far
        try:
            reader = export_items.Reader(session, runtime.plane, Actor(tenant.id, "api", "t"))
            page = [MemoryPointer(content_size=mib, storage_config_id=local.config_id)
                    for _ in range(16)]
            near_sizes = [len(w) for w in reader.windows(page)]
            page[5].storage_config_id = uuid.UUID(int=7)
            far_sizes = [len(w) for w in reader.windows(page)]
        finally:
            del targets[uuid.UUID(int=7)]
    assert export_items.FAR_WINDOW_BYTES < export_items.WINDOW_BYTES
    near, far_bytes = export_items.WINDOW_BYTES, export_items.FAR_WINDOW_BYTES
    assert near_sizes == [near // mib] * (16 * mib // near)
    assert far_sizes == [far_bytes // mib] * (16 * mib // far_bytes)


def test_an_export_over_many_windows_archives_every_value_as_verified(
        runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export_items, "WINDOW_BYTES", 300_000)  # 2 or 3 values per window
    actor, written = _fill(runtime, 11, 120_000)
    manifest, archive = _export(runtime, actor)
    assert manifest["counts"]["exported"] == 11
    assert {item["pointer_id"] for item in manifest["items"]} == set(written)
    for item in manifest["items"]:
        data = archive.read(item["file"])
        assert json.loads(data) == written[item["pointer_id"]]
        assert hashlib.sha256(data).hexdigest() == item["file_sha256"] == item["content_sha256"]
        assert archive.getinfo(item["file"]).compress_type == zipfile.ZIP_DEFLATED


def test_a_replaced_or_missing_object_is_listed_not_archived_and_the_pointer_marked(
        runtime: Runtime) -> None:
    actor, written = _fill(runtime, 6, 2_000)
    replaced, missing = sorted(written)[1], sorted(written)[4]
    with runtime.sessions() as session:
        target = runtime.plane.active(session, actor.tenant_id)
    # another memory's object, unchanged, where this one's belongs: it opens only without
    # encryption (a sealed one is bound to its own path and pointer), and its hash differs
    other = target.adapter.get(_pointer(runtime, sorted(written)[0]).storage_path)
    path = _pointer(runtime, replaced).storage_path
    target.adapter.delete_many([path, _pointer(runtime, missing).storage_path])
    target.adapter.put(path, other)

    manifest, archive = _export(runtime, actor)
    items = {item["pointer_id"]: item for item in manifest["items"]}
    counts = manifest["counts"]
    assert (counts["pointers"], counts["exported"], counts["corrupt"], counts["missing"]) \
        == (6, 4, 1, 1)
    assert (items[replaced]["status"], items[missing]["status"]) == ("corrupt", "missing")
    for pointer_id in (replaced, missing):
        assert (items[pointer_id]["file"], items[pointer_id]["hash_verified"]) == (None, False)
        assert f"items/{pointer_id}.json" not in archive.namelist()
        assert _pointer(runtime, pointer_id).sync_status == "corrupt"
    assert {"what": "memory value", "pointer_id": replaced,
            "why": export_collect._WHY["corrupt"]} in manifest["not_exported"]
    with runtime.sessions() as session:
        failures = session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == actor.tenant_id, AccessLog.success.is_(False))).all()
    assert {row.pointer_id for row in failures} == {uuid.UUID(replaced), uuid.UUID(missing)}
    assert all(row.detail.startswith("hash_mismatch") for row in failures)
    for pointer_id in set(written) - {replaced, missing}:
        assert json.loads(archive.read(items[pointer_id]["file"])) == written[pointer_id]


@pytest.mark.skipif(shutil.which("unzip") is None, reason="Info-ZIP unzip is not installed")
def test_a_member_larger_than_4_gib_takes_zip64_sizes(tmp_path: Path) -> None:
    # (inflating it all back would take half a minute; the small members' CRC-32s are
    # checked by the tests above)
    zeros, count = bytes(64 << 20), 65  # 4.06 GiB, deflated to a few MiB
    with open(tmp_path / "packed", "w+b") as packed:
        deflater = zipwriter.Deflater(packed)
        for _ in range(count):
            deflater.write(zeros)
        crc, size, compressed = deflater.finish()
        assert size == count * len(zeros) > 0xFFFFFFFF
        packed.seek(0)
        with open(tmp_path / "big.zip", "wb") as sink:
            writer = zipwriter.ZipWriter(sink, WHEN)
            writer.add_bytes("before", b"first")
            writer.add_packed_file("huge", packed, crc, size, compressed)
            writer.add_bytes("after", b"last")
            writer.close()
    with zipfile.ZipFile(tmp_path / "big.zip") as archive:
        assert archive.getinfo("huge").file_size == size
        assert (archive.read("before"), archive.read("after")) == (b"first", b"last")
        with archive.open("huge") as member:  # its local header, read past its extra field
            assert member.read(1 << 20) == bytes(1 << 20)
    listed = subprocess.run(["unzip", "-Z", "-l", str(tmp_path / "big.zip")],
                            capture_output=True, text=True)
    assert listed.returncode == 0 and f" {size} " in listed.stdout, listed.stdout
    after = subprocess.run(["unzip", "-p", str(tmp_path / "big.zip"), "after"],
                           capture_output=True)
    assert (after.returncode, after.stdout) == (0, b"last")


def test_a_key_destroyed_between_windows_opens_nothing_in_the_windows_after(
        runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each window asks the database (one statement outside the export's transaction) which
    of the keys it holds are still live: a subject key an erasure destroys meanwhile opens no
    value of a later window, though the export unwrapped it before."""
    from control_plane.compliance import subjects
    from control_plane.keys import repository as keys_repo

    monkeypatch.setattr(export_items, "WINDOW_BYTES", 300_000)  # two values per window
    actor, _ = _fill(runtime, 6, 120_000)
    with runtime.sessions() as session:
        reader = export_items.Reader(session, runtime.plane, actor)
        page = list(subjects.pointer_page(session, actor.tenant_id, SUBJECT, None, 100))
        session.commit()
        windows = list(reader.windows(page))
        first = reader.finish(reader.start(windows[0]))
        with runtime.sessions() as erasing:  # an erasure, committed beside the export
            keys_repo.destroy_subject(erasing, actor.tenant_id, "user", SUBJECT,
                                      datetime.now(UTC))
            erasing.commit()
        later = [read for window in windows[1:] for read in reader.finish(reader.start(window))]
    encrypted = runtime.plane.keys is not None and runtime.plane.keys.enabled
    assert [len(w) for w in windows] == [2, 2, 2]
    assert [read.status for read in first] == ["exported", "exported"]
    assert [read.member is None for read in later] == [encrypted] * 4
    assert {read.status for read in later} == ({"corrupt"} if encrypted else {"exported"})
