"""Replay a crash state onto the data directory, reconcile twice, check the invariants.

The state is written where the deployment's data directory was (its storage configuration
names the bucket by absolute path): the bucket tree the crash left, the database as last
committed before the crash (the SQLite file's copy, or on PostgreSQL the copied rows written
back into the deployment's own database, pgsnap.py), the key files as they were (written
once at start-up, before the log). Then the reconciler runs twice — ``reconcile`` and
``collect_orphans``, what ``memplane reconcile`` runs, with a grace period of zero — and the
invariants are checked:

- I2 no acknowledged write lost: each key reads its last acknowledged value, or a value sent
  after it (a request in flight at the crash may have committed); a key whose last
  acknowledged request deleted it reads nothing (or a value sent after);
- I1 no synced pointer without its object, and every synced pointer's object decrypts to
  content whose SHA-256 is the pointer's (so nothing served fails its hash);
- no orphan after two reconciles: every object under ``memories/`` and ``events/`` is named
  by a row, and no temporary file is left.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.audit import checkpoints
from control_plane.compliance import export_download
from control_plane.db.models import MemoryPointer, StorageConfig
from control_plane.errors import DomainError, NotFound
from control_plane.identity import Actor
from control_plane.integrity import reconcile as rec
from control_plane.keys import subject_keys as keys
from control_plane.memories import read as reads
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from storage_adapters.base import StorageError

from . import pgsnap
from .model import CrashState
from .recorder import Log

SCOPE_REF = "crash"


@dataclass
class Expectation:
    """What a key may read at a crash point: its last acknowledged value (None: deleted,
    or never acknowledged) and the values sent after it."""

    acked: bool
    last: str | None
    later: set[str | None]


def expectations(log: Log, point: int) -> dict[str, Expectation]:
    found: dict[str, Expectation] = {}
    for op in log.ops[:point]:
        if op.kind not in ("sent", "ack") or op.path.startswith(("export:", "checkpoint")):
            continue
        value = None if op.data is None else op.data.decode()
        e = found.setdefault(op.path, Expectation(False, None, set()))
        if op.kind == "sent":
            e.later.add(value)
        else:
            found[op.path] = Expectation(True, value, set())
    return found


def restore(state: CrashState, log: Log, data_dir: Path, keep: Path,
            settings: Settings) -> None:
    """Write the crash state over ``data_dir`` (``keep``: its files other than the bucket
    and the database, saved when the log began) and the database as of its last commit
    (on PostgreSQL into the deployment's own database, emptied first)."""
    shutil.rmtree(data_dir)
    shutil.copytree(keep, data_dir)
    for d in state.dirs:
        os.makedirs(d, exist_ok=True)
    for path, data in state.files:
        Path(path).write_bytes(data)
    snapshot = log.snapshots[state.snap]
    if isinstance(snapshot, pgsnap.Snapshot):
        pgsnap.restore(snapshot, settings.resolved_database_url)
    else:
        shutil.copyfile(snapshot, data_dir / "memplane.db")


def reconcile_twice(runtime: Runtime) -> list[str]:
    errors: list[str] = []
    for _ in range(2):
        with runtime.sessions() as session:
            report = rec.reconcile(session, runtime.plane, grace_seconds=0,
                                   settings=runtime.settings)
            errors += report.errors
            rec.collect_orphans(session, runtime.plane, grace_seconds=0)
    return errors


def check(runtime: Runtime, tenant_id: uuid.UUID, expected: dict[str, Expectation],
          root: Path) -> list[str]:
    """The invariants' violations in this state (empty: none)."""
    found: list[str] = []
    actor = Actor(tenant_id, "api", "crashstates")
    for key, e in sorted(expected.items()):
        scope, ref, name = key.split("/")
        try:
            with runtime.sessions() as session:
                address = MemoryAddress.parse(Scope(scope), ref, name)
                value: str | None = reads.get_value(session, runtime.plane, actor,
                                                    address).value
        except NotFound:
            value = None
        except (DomainError, StorageError) as exc:
            found.append(f"I2 {key}: read failed: {type(exc).__name__}: {exc}")
            continue
        allowed = e.later | ({e.last} if e.acked else {None})
        if value not in allowed:
            found.append(f"I2 {key}: read {value!r}, expected one of {sorted(map(str, allowed))}")
    with runtime.sessions() as session:
        pointers = list(session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == tenant_id)))
        for p in pointers:
            if p.sync_status != "synced":
                continue
            blob_path = root / p.storage_path
            if not blob_path.is_file():
                found.append(f"I1 {p.key}: synced pointer without its object")
                continue
            try:
                plain = keys.open_object(session, runtime.plane.keys, p.tenant_id,  # type: ignore[arg-type]
                                         p.storage_path, p.id, blob_path.read_bytes())
            except Exception as exc:  # noqa: BLE001 - any failure to open is the finding
                found.append(f"I1 {p.key}: object does not open: {type(exc).__name__}")
                continue
            if hashlib.sha256(plain).hexdigest() != p.content_sha256:
                found.append(f"I1 {p.key}: object fails its hash")
        for config in session.scalars(select(StorageConfig).where(
                StorageConfig.tenant_id == tenant_id)):
            prefix = root / "tenants" / str(tenant_id)
            paths = [f.relative_to(root).as_posix() for part in ("memories", "events")
                     for f in (prefix / part).rglob("*") if f.is_file()]
            named = rec._named(session, config.id, paths) if paths else set()
            found += [f"orphan {p}" for p in sorted(set(paths) - named)]
    tmp = root / ".memplane-tmp"
    if tmp.exists() and any(tmp.iterdir()):
        found.append(f"temporary files left: {sorted(x.name for x in tmp.iterdir())}")
    return found


def check_exports_and_checkpoints(runtime: Runtime, tenant_id: uuid.UUID, log: Log,
                                  point: int) -> list[str]:
    """An export acknowledged (its job completed) downloads, decrypted and hash-checked; the
    audit checkpoints in the bucket agree with the database's record of them."""
    found: list[str] = []
    actor = Actor(tenant_id, "api", "crashstates")
    marks = [op.path for op in log.ops[:point] if op.kind == "ack"]
    for job in (m.split(":", 1)[1] for m in marks if m.startswith("export:")):
        try:
            with runtime.sessions() as session:
                chunks, size = export_download.download(session, runtime.plane, actor,
                                                        uuid.UUID(job))
                if sum(len(c) for c in chunks) != size:
                    found.append(f"export {job}: archive of the wrong size")
        except (DomainError, StorageError) as exc:
            found.append(f"export {job}: does not download: {type(exc).__name__}")
    with runtime.sessions() as session:
        report = checkpoints.check(session, runtime.plane, runtime.settings, tenant_id)
    if report.problem is not None:
        found.append(f"audit checkpoints: {report.problem}")
    return found


def replay(state: CrashState, log: Log, data_dir: Path, keep: Path,
           tenant_id: uuid.UUID, settings: Settings) -> list[str]:
    """``settings``: the recorded deployment's (its database, bucket and keys)."""
    restore(state, log, data_dir, keep, settings)
    runtime = Runtime(settings)
    try:
        errors = [f"reconcile: {e}" for e in reconcile_twice(runtime)]
        return errors + check(runtime, tenant_id, expectations(log, state.point),
                              data_dir / "bucket") + check_exports_and_checkpoints(
            runtime, tenant_id, log, state.point)
    finally:
        runtime.close()
