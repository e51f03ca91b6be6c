"""Secrets kept in files: read from a mounted file (``MEMPLANE_*_FILE``), written once.

A written secret file is created exclusively (never over an existing file, which may hold
the only copy of an earlier secret) with mode 0600, and synced before it is closed, so a
crash leaves either no file or a whole one. The secret itself never reaches a log line or an
error message: only the file's path does.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

# Settings that may also be given as the path of a file holding them (MEMPLANE_<NAME>_FILE).
FILE_SETTINGS = ("server_key", "receipt_signing_key", "admin_key", "metrics_token")


class SecretFileExists(FileExistsError):
    """The file a new secret should go to already exists; it is left as it is."""


def read_secret_file(path: Path, setting: str) -> str:
    """The secret in ``path`` without surrounding whitespace (a trailing newline, say)."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{setting} names {path}, which cannot be read "
                         f"({type(exc).__name__}); mount the secret file there") from None
    if not text:
        raise ValueError(f"{setting} names {path}, which is empty; it must hold the secret")
    return text


def create_secret_file(path: Path, secret: str) -> None:
    """Write ``secret`` into a new file ``path`` (mode 0600); raises SecretFileExists, with a
    sentence naming the path, when anything is already there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise SecretFileExists(f"{path} already exists; move it away (it may hold the only "
                               "copy of an earlier secret) or name another file") from None
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, secret.encode("utf-8") + b"\n")
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)


def remove_secret_file(path: Path) -> None:
    """Remove a secret file this process wrote whose secret was never put to use."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


# What `memplane keys generate` writes, by file name: the setting each file is for.
GENERATED: dict[str, str] = {
    "server.key": "MEMPLANE_SERVER_KEY",
    "receipt-signing.key": "MEMPLANE_RECEIPT_SIGNING_KEY",
    "admin.key": "MEMPLANE_ADMIN_KEY",
    "metrics.token": "MEMPLANE_METRICS_TOKEN",
}


def _server_key() -> str:
    return secrets.token_hex(32)  # 32 random bytes: enough to derive signing keys from


def _signing_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()  # an Ed25519 private key's raw bytes


def _metrics_token() -> str:
    return secrets.token_urlsafe(32)


def generate_secret_files(directory: Path, new_admin_key: Callable[[], str]) -> dict[str, bool]:
    """Each file of GENERATED in ``directory`` that is missing, with a new secret (mode 0600);
    files already there are kept as they are. Answers, by file name, whether it was made.
    ``new_admin_key`` makes the admin key: an API key, whose form the tenants domain owns."""
    generators: dict[str, Callable[[], str]] = {
        "server.key": _server_key,
        "receipt-signing.key": _signing_key,
        "admin.key": new_admin_key,
        "metrics.token": _metrics_token,
    }
    made: dict[str, bool] = {}
    for name in GENERATED:
        try:
            create_secret_file(directory / name, generators[name]())
            made[name] = True
        except SecretFileExists:
            made[name] = False
    return made
