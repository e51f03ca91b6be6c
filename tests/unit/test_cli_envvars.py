"""Every environment variable the CLI reads for an option is known to the server's settings
check, which warns about a ``MEMPLANE_*`` name it does not know: ``MEMPLANE_WORKERS=4
memplane serve`` must not print that the variable is ignored while it is used."""

from __future__ import annotations

from typing import Any

import typer.main

from control_plane.settings import unknown_setting_warnings
from memplane.cli import app


def _envvars(command: Any) -> set[str]:
    """The environment variables of a command's options and its subcommands' (typer's own
    click)."""
    names: set[str] = set()
    for param in command.params:
        envvar = getattr(param, "envvar", None)
        names |= {envvar} if isinstance(envvar, str) else set(envvar or ())
    for sub in getattr(command, "commands", {}).values():
        names |= _envvars(sub)
    return names


def test_no_option_the_cli_reads_from_the_environment_is_called_unknown() -> None:
    names = _envvars(typer.main.get_command(app))
    assert {"MEMPLANE_WORKERS", "MEMPLANE_URL", "MEMPLANE_API_KEY",
            "MEMPLANE_DATA_DIR"} <= names
    assert unknown_setting_warnings(dict.fromkeys(names, "4")) == []


def test_a_misspelt_cli_variable_is_still_named() -> None:
    assert unknown_setting_warnings({"MEMPLANE_WORKER": "4"}) == [
        "MEMPLANE_WORKER is not a memplane setting and is ignored; did you mean "
        "MEMPLANE_WORKERS?"]
