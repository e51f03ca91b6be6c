"""Commands for compliance officers, run against a memplane server (local or remote).

Each is a thin shell over the SDK: ``--url``/``--api-key`` (or ``MEMPLANE_URL`` and
``MEMPLANE_API_KEY``) name the server and a key with role admin or compliance. ``memplane
worker`` is the exception: it runs jobs against the database and buckets directly.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

import memplane

console = Console(stderr=True)
out = Console()

Url = Annotated[str | None, typer.Option("--url", envvar="MEMPLANE_URL",
                                         help="Server URL, e.g. https://memplane.example.com.")]
ApiKey = Annotated[str | None, typer.Option("--api-key", envvar="MEMPLANE_API_KEY",
                                            help="An API key with role admin or compliance.")]
Timeout = Annotated[float, typer.Option(help="Give up waiting for the job after this many "
                                              "seconds (it keeps running on the server).")]


@contextmanager
def _client(url: str | None, api_key: str | None) -> Iterator[memplane.Client]:
    if not url:
        raise typer.BadParameter("give the server with --url or MEMPLANE_URL",
                                 param_hint="--url")
    if not api_key:
        raise typer.BadParameter("give an API key with --api-key or MEMPLANE_API_KEY",
                                 param_hint="--api-key")
    with memplane.Client(url, api_key) as client:
        try:
            yield client
        except memplane.APIError as exc:
            console.print(f"[red]error:[/] {exc.detail or exc}")
            raise typer.Exit(1) from None
        except memplane.TransportError as exc:
            console.print(f"[red]cannot reach {url}:[/] {exc}")
            raise typer.Exit(1) from None


def _wait(client: memplane.Client, job: memplane.Job, timeout: float) -> memplane.Job:
    with console.status(f"{job.kind} job {job.id}: {job.state}") as status:
        def show(current: memplane.Job) -> None:
            done = ", ".join(f"{k}={v}" for k, v in sorted(current.progress.items())
                             if isinstance(v, int) and not isinstance(v, bool))
            status.update(f"{current.kind} job {current.id}: {current.state}  {done}")

        try:
            finished = client.jobs.wait(job.id, timeout=timeout, on_progress=show)
        except TimeoutError:
            console.print(f"[yellow]job {job.id} is still running; check it later with "
                          f"the same command (it is safe to rerun)[/]")
            raise typer.Exit(2) from None
    if finished.state != "completed":
        console.print(f"[red]{job.kind} job {job.id} failed:[/] {finished.error}")
        raise typer.Exit(1)
    return finished


def export(
    user_id: Annotated[str, typer.Argument(help="The data subject's user id.")],
    out_file: Annotated[Path, typer.Option("--out", help="Where to save the ZIP.")],
    job_id: Annotated[str | None, typer.Option(
        "--job", help="Download this finished export of the subject again instead of "
                      "starting one (archives expire after MEMPLANE_EXPORT_TTL_HOURS).")]
    = None,
    url: Url = None, api_key: ApiKey = None, timeout: Timeout = 3600.0,
) -> None:
    """Export everything stored about a data subject (GDPR Art. 15/20) into a ZIP.

    An export of the subject already queued or running is joined rather than started twice.
    """
    with _client(url, api_key) as client:
        if job_id is None:
            job = client.memory.export(user_id=user_id)
            finished = _wait(client, job, timeout)
        else:
            finished = client.jobs.get(job_id)
            if finished.kind != "export":
                console.print(f"[red]job {job_id} is a {finished.kind} job, not an export[/]")
                raise typer.Exit(1)
        try:
            size = client.exports.download(finished.id, out_file)
        except memplane.APIError as exc:
            if exc.status_code != 410:
                raise
            console.print(f"[red]export job {finished.id} has expired:[/] {exc.detail}\n"
                          f"run `memplane export {user_id} --out {out_file}` to build a new "
                          "one")
            raise typer.Exit(1) from None
        counts = (finished.result or {}).get("counts", {})
        console.print(f"export job {finished.id}: {counts.get('exported', 0)} of "
                      f"{counts.get('pointers', 0)} memories exported; "
                      f"{size} bytes saved to {out_file}")
        expires = (finished.result or {}).get("expires_at")
        if expires:
            console.print(f"the archive stays in the bucket until {expires} (UTC)")
        if counts.get("missing") or counts.get("corrupt"):
            console.print(f"[yellow]{counts.get('missing', 0)} missing and "
                          f"{counts.get('corrupt', 0)} corrupt memories are listed in "
                          "manifest.json under not_exported[/]")


def erase(
    user_id: Annotated[str, typer.Argument(help="The data subject's user id.")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask to retype the user id.")]
    = False,
    receipt_out: Annotated[Path | None, typer.Option(
        "--receipt-out", help="Where to save the signed receipt; default receipt-<id>.json.")]
    = None,
    url: Url = None, api_key: ApiKey = None, timeout: Timeout = 3600.0,
) -> None:
    """Erase a data subject (GDPR Art. 17): show the plan, confirm, erase, save the receipt.

    Safe to rerun: a second erasure finds nothing, deletes nothing and says so.
    """
    with _client(url, api_key) as client:
        plan = _wait(client, client.memory.erase_user(user_id, dry_run=True), timeout)
        _show_plan(plan.result or {})
        if not yes:
            typed = typer.prompt("Retype the user id to erase it for good")
            if typed != user_id:
                console.print("[red]the ids differ; nothing was erased[/]")
                raise typer.Exit(1)
        finished = _wait(client, client.memory.erase_user(user_id), timeout)
        result = finished.result or {}
        receipt = client.receipts.get(result["receipt_id"])
        path = receipt_out or Path(f"receipt-{receipt.id}.json")
        path.write_text(json.dumps(receipt.as_dict(), indent=2, ensure_ascii=False) + "\n")
        counts = result.get("counts", {})
        console.print(f"erasure job {finished.id} completed: "
                      + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        if result.get("note"):
            console.print(result["note"])
        console.print(f"signed receipt saved to {path}")
        typer.echo(str(path))


def _show_plan(plan: dict[str, Any]) -> None:
    table = Table(title="erasure plan (dry run: nothing deleted yet)")
    table.add_column("what")
    table.add_column("would be deleted", justify="right")
    table.add_row("pointers", str(plan.get("pointers", 0)))
    for scope, n in sorted(plan.get("pointers_by_scope", {}).items()):
        table.add_row(f"  in scope {scope}", str(n))
    table.add_row("objects named by them", str(plan.get("objects", 0)))
    table.add_row("objects under the subject's prefix",
                  str(plan.get("objects_under_subject_prefix", 0)))
    table.add_row("noncurrent versions there",
                  str(plan.get("noncurrent_versions_under_subject_prefix", 0)))
    table.add_row("keys", str(plan.get("keys", "")))
    console.print(table)


def receipt_verify(
    receipt_file: Annotated[Path, typer.Argument(help="The receipt JSON file.")],
    public_key: Annotated[Path, typer.Option(
        "--public-key", help="The server's PEM key (GET /v1/receipts/public-key).")],
    verifier_key: Annotated[str | None, typer.Option(
        "--verifier-key", help="The audit log's verifier key, or a file holding it (GET "
                               "/v1/audit/verifier-key); default: the PEM key under the "
                               "log's name.")] = None,
) -> None:
    """Verify a receipt offline; exit 1 if anything in it was changed.

    A receipt that carries ``transparency`` is also proven against the audit log: its
    checkpoint's signature, and each of its job's audit rows by an inclusion proof against
    that checkpoint."""
    from .._receipts import parse_receipt, verify_receipt
    from .transparency import check_transparency, receipt_verifier

    try:
        receipt = parse_receipt(receipt_file.read_bytes())
        pem = public_key.read_bytes()
        ok = verify_receipt(receipt, pem)
        verifier = receipt_verifier(verifier_key, pem, receipt) if ok else None
    except (OSError, ValueError) as exc:
        console.print(f"[red]cannot verify:[/] {exc}")
        raise typer.Exit(1) from None
    if not ok or verifier is None:
        console.print("[red]INVALID[/]: the receipt was changed or signed by another key")
        raise typer.Exit(1)
    console.print(f"valid: receipt {receipt.get('id')} signed by key {receipt.get('key_id')}")
    if "transparency" not in receipt:
        console.print("it carries no proofs against the audit log (issued before receipts "
                      "did)")
        return
    try:
        console.print(f"in the audit log: {check_transparency(receipt, verifier)}",
                      soft_wrap=True)
    except ValueError as exc:
        console.print(f"[red]INVALID[/]: {exc}", soft_wrap=True)
        raise typer.Exit(1) from None


def audit_list(
    url: Url = None, api_key: ApiKey = None,
    operation: Annotated[str | None, typer.Option(help="e.g. erase, export, read.")] = None,
    pointer_id: Annotated[str | None, typer.Option()] = None,
    accessor_id: Annotated[str | None, typer.Option()] = None,
    since: Annotated[datetime | None, typer.Option(help="ISO time, inclusive.")] = None,
    until: Annotated[datetime | None, typer.Option(help="ISO time, exclusive.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many rows.")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """List the tenant's audit log from a server, filtered."""
    with _client(url, api_key) as client:
        rows = []
        for entry in client.audit.iter(operation=operation, pointer_id=pointer_id,
                                       accessor_id=accessor_id, since=since, until=until,
                                       limit=min(limit, 1000)):
            rows.append(entry)
            if len(rows) >= limit:
                break
    if as_json:
        for entry in rows:
            typer.echo(entry.model_dump_json())
        return
    table = Table(title=f"audit ({len(rows)} rows)")
    for column in ("seq", "time", "operation", "ok", "accessor", "pointer", "detail"):
        table.add_column(column)
    for entry in rows:
        table.add_row(str(entry.seq), entry.accessed_at.isoformat(timespec="seconds"),
                      entry.operation, "yes" if entry.success else "NO",
                      entry.accessor_id or "", entry.pointer_id or "", str(entry.detail or ""))
    out.print(table)


def audit_verify(
    url: Url = None, api_key: ApiKey = None,
    tenant: Annotated[str | None, typer.Option(
        help="Local only: tenant id; default every tenant. With --bucket: the tenant whose "
             "log it must be.")] = None,
    bucket: Annotated[list[str] | None, typer.Option(
        "--bucket", help="Prove the log from this bucket alone (URL or directory, at the "
                         "tenant's prefix; the first one given is where the log starts); "
                         "repeat for every bucket the tenant anchored to.")] = None,
    verifier_key: Annotated[str | None, typer.Option(
        "--verifier-key", help="With --bucket: the log's verifier key, or a file holding it "
                               "(GET /v1/audit/verifier-key).")] = None,
    database_url: Annotated[str | None, typer.Option(
        "--database-url", help="With --bucket: also recompute every row's leaf from this "
                               "database and hold it to the checkpoints.")] = None,
) -> None:
    """Recompute the audit hash chain and hold it to the signed checkpoints in the
    tenant's bucket; exit 1 if either disagrees (``first_bad_checkpoint`` names which).

    With --url (or MEMPLANE_URL) the server checks the key's tenant; without, every tenant
    of the local database is checked. With --bucket, no server and no database are needed:
    every checkpoint in the buckets must carry the log's signature and extend the one
    before it, and every move of the anchor must itself be a checkpointed row.
    """
    if bucket:
        from .transparency import audit_verify_buckets

        audit_verify_buckets(bucket, verifier_key, tenant, database_url)
        return
    if not url:
        from .local import audit_verify as local_verify

        local_verify(tenant=tenant)
        return
    with _client(url, api_key) as client:
        result = client.audit.verify()
    typer.echo(json.dumps(result.model_dump(mode="json")))
    if not result.ok:
        raise typer.Exit(1)


def worker(
    lease_seconds: Annotated[float | None, typer.Option(
        help="Job lease; default MEMPLANE_JOB_LEASE_SECONDS.")] = None,
    metrics_port: Annotated[int | None, typer.Option(
        help="Serve this worker's job and storage metrics at http://<host>:<port>/metrics "
             "(with MEMPLANE_METRICS_TOKEN as its bearer token when set).")] = None,
    metrics_host: Annotated[str, typer.Option(
        help="Interface for --metrics-port.")] = "0.0.0.0",
) -> None:
    """Run export, erasure and compaction jobs (and the daily compaction schedule) from the
    configured database until interrupted; with MEMPLANE_EMBED_ON_WRITE (the default), also
    the search indexer that embeds what was written."""
    from control_plane.job_handlers import JobWorker
    from control_plane.observability.json_logs import configure_logging
    from control_plane.workers import limit_malloc_arenas

    from .local import _runtime

    limit_malloc_arenas()  # as `memplane serve` does
    with _runtime(bucket=True) as runtime:  # refuses a database or bucket it cannot use
        configure_logging(runtime.settings.log_level)
        job_worker = JobWorker(runtime.sessions, runtime.plane, runtime.settings,
                               lease_seconds=lease_seconds)
        if metrics_port is not None:
            from control_plane.observability.metrics import Metrics
            from control_plane.observability.metrics_server import serve_metrics

            runtime.plane.metrics = Metrics()
            token = runtime.settings.metrics_token
            serve_metrics(runtime.plane.metrics, metrics_host, metrics_port,
                          token.get_secret_value() if token else None)
        if runtime.settings.embed_on_write:
            runtime.start_indexer()  # stopped by the runtime's close
        console.print(f"memplane worker {job_worker.owner} waiting for jobs")
        stop = threading.Event()
        # MEMPLANE_JOB_THREADS jobs side by side: this thread's worker does the chores too
        for _ in range(runtime.settings.job_threads - 1):
            threading.Thread(target=JobWorker(runtime.sessions, runtime.plane,
                                              runtime.settings, lease_seconds=lease_seconds,
                                              chores=False).run_forever,
                             args=(stop,), name="memplane-job-worker", daemon=True).start()
        try:
            job_worker.run_forever(stop)
        except KeyboardInterrupt:
            stop.set()
            console.print("worker stopped")
