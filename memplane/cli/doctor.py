"""``memplane doctor``: check a deployment's configuration and print each finding with its
fix (control_plane/doctor.py; docs/doctor.md)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from .local import WHERE


def doctor(
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the checks as one JSON object instead of lines.")] = False,
    processes: Annotated[int, typer.Option(
        min=1, help="How many memplane processes share the database (API replicas x "
                    "--workers, plus job workers and jobs), for the connection budget.")] = 1,
) -> None:
    """Check what a new deployment gets wrong: database reachable and migrated, server key,
    default bucket, KEK provider, clock skew, connection budget, metrics token, TLS.

    Exit code 0: all ok; 1: a warning; 2: a failure."""
    from pydantic import ValidationError

    from control_plane import doctor as checks
    from control_plane.settings import Settings

    try:
        settings = Settings(data_dir=WHERE.data_dir) if WHERE.data_dir else Settings()
    except ValidationError as exc:
        found = [checks.Check("settings", "fail", _setting_error(e), "fix the setting")
                 for e in exc.errors(include_url=False, include_input=False)]
    else:
        found = checks.run(settings, processes=processes)
    if as_json:
        typer.echo(json.dumps(checks.as_json(found)))
    else:
        width = max(len(c.name) for c in found)
        for check in found:
            typer.echo(f"{check.status:<4}  {check.name:<{width}}  {check.summary}")
            if check.fix:
                typer.echo(f"{'':<4}  {'':<{width}}  fix: {check.fix}")
    raise typer.Exit(checks.EXIT_CODES[checks.worst(found)])


def _setting_error(error: object) -> str:
    assert isinstance(error, dict)
    name = "_".join(str(part) for part in error["loc"]).upper()
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"MEMPLANE_{name}: {message}" if name else message
