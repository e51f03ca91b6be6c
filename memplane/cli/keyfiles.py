"""`memplane keys generate`: a deployment's secrets made once, into files (compose's first
start writes them into a volume the services read them from through MEMPLANE_*_FILE)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .local import console


def keys_generate(
    directory: Annotated[Path, typer.Option(
        "--dir", help="Directory the secret files go into (created if missing).")],
) -> None:
    """Write each missing secret into its own file in DIR, mode 0600: server.key,
    receipt-signing.key, admin.key and metrics.token (for MEMPLANE_SERVER_KEY_FILE,
    MEMPLANE_RECEIPT_SIGNING_KEY_FILE, MEMPLANE_ADMIN_KEY_FILE, MEMPLANE_METRICS_TOKEN_FILE).
    Files already there are kept, so it is safe to run at every start. Prints the files'
    names, never their contents."""
    from control_plane.secret_files import GENERATED, generate_secret_files
    from control_plane.tenants.service import new_key

    for name, made in generate_secret_files(directory, new_key).items():
        setting = GENERATED[name]
        console.print(f"{'wrote' if made else 'kept'} {directory / name} ({setting}_FILE)",
                      soft_wrap=True)
