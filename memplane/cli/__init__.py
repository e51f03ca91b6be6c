"""The ``memplane`` command: run the service and operate it.

Every command is a thin shell over importable, idempotent functions of the control plane.
Commands that work on the database directly read the same ``MEMPLANE_*`` settings as the
server (``MEMPLANE_DATA_DIR`` for the embedded default, ``MEMPLANE_DATABASE_URL`` otherwise).
"""

from __future__ import annotations

import typer

from . import compliance, crypto, local

app = typer.Typer(help="memplane: memory for AI agents, content in your own bucket.",
                  no_args_is_help=True, add_completion=False)
app.command("serve")(local.serve)
app.command("reconcile")(local.reconcile)
app.command("verify")(crypto.verify)
app.command("worker")(compliance.worker)
app.command("export")(compliance.export)
app.command("erase")(compliance.erase)

receipt_app = typer.Typer(help="Signed erasure receipts.", no_args_is_help=True)
receipt_app.command("verify")(compliance.receipt_verify)
app.add_typer(receipt_app, name="receipt")

db_app = typer.Typer(help="The control-plane database.", no_args_is_help=True)
db_app.command("upgrade")(local.db_upgrade)
app.add_typer(db_app, name="db")

keys_app = typer.Typer(help="API keys and encryption keys.", no_args_is_help=True)
keys_app.command("create")(local.keys_create)
keys_app.command("rotate")(crypto.keys_rotate)
keys_app.command("retire-kek")(crypto.keys_retire)
app.add_typer(keys_app, name="keys")

audit_app = typer.Typer(help="The access audit log.", no_args_is_help=True)
audit_app.command("verify")(compliance.audit_verify)
audit_app.command("list")(compliance.audit_list)
app.add_typer(audit_app, name="audit")


def main() -> None:
    app()
