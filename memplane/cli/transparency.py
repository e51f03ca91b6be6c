"""The audit log and receipts checked offline: ``memplane audit verify --bucket`` proves the
log from the tenant's buckets and the log's verifier key alone (no server, no database;
``--database-url`` adds the rows), and ``memplane receipt verify`` checks the inclusion
proofs a receipt carries (``control_plane/audit/offline.py`` and ``control_plane/tlog``)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from control_plane.audit.offline import Bucket
    from control_plane.tlog.note import Verifier

console = Console(stderr=True)


def verifier_of(value: str) -> Verifier:
    """A verifier key given as its text (``name+id+base64``) or as a file holding it."""
    from control_plane.tlog import note

    text = value
    if "+" not in value:
        try:
            text = Path(value).read_text()
        except OSError as exc:
            raise typer.BadParameter(f"cannot read {value}: {exc.strerror}",
                                     param_hint="--verifier-key") from None
    try:
        return note.parse_verifier(text)
    except note.NoteError as exc:
        raise typer.BadParameter(str(exc), param_hint="--verifier-key") from None


def open_bucket(value: str, tenant: str | None) -> Bucket:
    """A bucket URL (``s3://bucket/prefix``, ``gs://…``, ``az://…``, ``file:///dir``) or a
    directory, read with the caller's own credentials. When it holds no log of its own but
    ``tenant`` is given, the tenant's prefix in it (``tenants/<id>``, the layout of the
    operator's default bucket) is read."""
    from control_plane.audit.offline import Bucket, checkpoint_path
    from storage_adapters.registry import MissingExtra, UnknownBackend, from_url

    from .local import missing_extra, redact_url

    if "://" in value:
        url, name = value, redact_url(value)
    else:
        path = Path(value).expanduser().resolve()
        if not path.is_dir():
            raise typer.BadParameter(f"{value} is not a directory", param_hint="--bucket")
        url, name = path.as_uri(), str(path)
    try:
        adapter = from_url(url, allow_ambient_credentials=True)
    except MissingExtra as exc:
        missing_extra(exc)
    except (UnknownBackend, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--bucket") from None
    bucket = Bucket(name, adapter)
    folder = bucket.path(*checkpoint_path(0)[:-1]) + "/"
    if tenant and next(iter(adapter.list(folder)), None) is None:
        return Bucket(f"{name} (tenants/{tenant})", adapter, f"tenants/{tenant}")
    return bucket


def audit_verify_buckets(buckets: Sequence[str], verifier_key: str | None, tenant: str | None,
                         database_url: str | None) -> None:
    """Verify the log in ``buckets``; print a JSON summary and exit 1 on the first problem."""
    from control_plane.audit import offline
    from storage_adapters import base as storage

    if not verifier_key:
        raise typer.BadParameter("give the log's verifier key (GET /v1/audit/verifier-key)",
                                 param_hint="--verifier-key")
    verifier = verifier_of(verifier_key)
    opened = [open_bucket(value, tenant) for value in buckets]
    try:
        verified = offline.verify(opened, verifier, tenant_id=tenant)
    except offline.Failure as exc:
        _fail(str(exc))
    except storage.StorageError as exc:
        _fail(f"a bucket could not be read ({storage.problem_code(exc)}); retry when it is "
              "reachable")
    summary = verified.summary()
    if database_url:
        summary.update(_rows(database_url, tenant or verified.origin.rsplit("/", 1)[-1],
                             verified.heads))
    typer.echo(json.dumps(summary))
    console.print(f"valid: {verified.checkpoints} checkpoints of {verified.origin} in "
                  f"{verified.places} bucket(s), each extending the one before; "
                  f"{verified.moves} move(s) of the anchor, each in the log")


def _rows(database_url: str, tenant: str, heads: Sequence[tuple[int, bytes]]
          ) -> dict[str, Any]:
    import uuid

    from control_plane.audit.leaf_check import leaves_agree
    from control_plane.db.engine import make_engine, make_session_factory

    try:
        tenant_id = uuid.UUID(tenant)
    except ValueError:
        raise typer.BadParameter(f"{tenant!r} is not a tenant id", param_hint="--tenant") from None
    engine = make_engine(database_url, pool_size=1)
    try:
        with make_session_factory(engine)() as session:
            report = leaves_agree(session, tenant_id, heads)
    finally:
        engine.dispose()
    if not report.ok:
        assert report.problem is not None
        _fail(report.problem, rows_checked=report.rows)
    return {"rows_checked": report.rows, "checkpoints_matching_rows": report.checkpoints}


def _fail(problem: str, **extra: Any) -> Any:
    typer.echo(json.dumps({"ok": False, "problem": problem, **extra}))
    console.print(f"[red]INVALID[/]: {problem}", soft_wrap=True)
    raise typer.Exit(1)


# -- receipts ---------------------------------------------------------------------------------


def check_transparency(document: Mapping[str, Any], verifier: Verifier) -> str:
    """Check the ``transparency`` block of a receipt: the checkpoint's signature (the log's key,
    the receipt's tenant), each row's inclusion proof against its root, each row naming the
    receipt's job, and the rows the receipt names (``audit.first_seq``/``last_seq``) among
    them. Returns a line saying what was proven; raises ValueError with the sentence that
    says what is wrong."""
    from control_plane.tlog import merkle, note

    block = document.get("transparency")
    if not isinstance(block, dict):
        raise ValueError("the receipt carries no transparency proofs")
    try:
        text = note.verify(str(block.get("checkpoint")), verifier)
        checkpoint = note.parse_checkpoint(text)
    except note.NoteError as exc:
        raise ValueError(f"its checkpoint does not carry a valid signature of the log's key "
                         f"{verifier.name} ({exc}): it was altered or signed by another "
                         "key") from None
    tenant, job = document.get("tenant_id"), document.get("job_id")
    if not checkpoint.origin.endswith(f"/audit/{tenant}"):
        raise ValueError(f"its checkpoint is of the log {checkpoint.origin}, not of the "
                         f"receipt's tenant {tenant}")
    proven: list[int] = []
    for item in block.get("proofs") or []:
        seq, leaf, hashes = _proof_item(item)
        if not merkle.verify_inclusion(merkle.leaf_hash(leaf), seq - 1, checkpoint.size,
                                       hashes, checkpoint.root):
            raise ValueError(f"the inclusion proof of row {seq} does not verify against the "
                             f"checkpoint of {checkpoint.size} rows: the row or its proof "
                             "was altered")
        try:
            row = json.loads(leaf)
        except ValueError:
            row = None
        detail = row.get("detail") if isinstance(row, dict) else None
        if not isinstance(row, dict) or row.get("seq") != seq or not isinstance(detail, str) \
                or not (detail == f"job {job}" or detail.startswith(f"job {job}:")):
            raise ValueError(f"row {seq}, proven in the log, is not a row of job {job}")
        proven.append(seq)
    if not proven:
        raise ValueError("the receipt's transparency block proves no row")
    audit = document.get("audit")
    named = [audit.get(k) for k in ("first_seq", "last_seq")] if isinstance(audit, dict) else []
    missing = [seq for seq in named if seq is not None and seq not in proven]
    if missing:
        raise ValueError(f"row {missing[0]}, which the receipt names, has no inclusion proof")
    return (f"rows {', '.join(map(str, proven))} of job {job} proven in checkpoint "
            f"{checkpoint.size} of {checkpoint.origin}")


def _proof_item(item: Any) -> tuple[int, bytes, list[bytes]]:
    try:
        seq = item["seq"]
        leaf = base64.b64decode(item["leaf"], validate=True)
        hashes = [base64.b64decode(h, validate=True) for h in item["hashes"]]
    except (KeyError, TypeError, binascii.Error, ValueError):
        raise ValueError("a proof in the receipt is not {seq, leaf, hashes} in base64") from None
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise ValueError("a proof in the receipt names no row")
    return seq, leaf, hashes


def receipt_verifier(verifier_key: str | None, public_key_pem: bytes,
                     document: Mapping[str, Any]) -> Verifier:
    """The verifier key given, else the receipt key under the checkpoint's key name (the log's
    notes are signed with the receipt key: GET /v1/audit/verifier-key names the same key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from control_plane.tlog import note

    if verifier_key:
        return verifier_of(verifier_key)
    block = document.get("transparency")
    text = str(block.get("checkpoint", "")) if isinstance(block, dict) else ""
    public = serialization.load_pem_public_key(public_key_pem)
    if not isinstance(public, Ed25519PublicKey):
        raise ValueError("the public key is not an Ed25519 key")
    return note.Verifier(text.split("/", 1)[0] or "memplane", public)
