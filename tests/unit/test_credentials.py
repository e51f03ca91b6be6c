"""The server key and the sealing of tenant bucket credentials."""

from __future__ import annotations

import stat
import uuid
from pathlib import Path

import pytest
from pydantic import SecretStr

from control_plane.plane.credentials import (
    CredentialBox,
    CredentialsUnreadable,
    associated_data,
    load_server_key,
)
from control_plane.settings import Settings


def test_embedded_default_generates_a_private_key_file_once(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    first = load_server_key(settings)
    path = tmp_path / "data" / "server.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().strip() == first
    assert len(first) == 64  # secrets.token_urlsafe(48): 48 random bytes, base64url
    assert load_server_key(Settings(data_dir=tmp_path / "data")) == first


def test_a_configured_key_is_used_and_no_file_is_written(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, server_key=SecretStr("k" * 40))
    assert load_server_key(settings) == "k" * 40
    assert not (tmp_path / "server.key").exists()


def test_sealed_credentials_open_only_with_the_same_key_and_row() -> None:
    tenant, row = uuid.uuid4(), uuid.uuid4()
    box = CredentialBox("a-server-key-of-enough-length-0001")
    blob = box.seal({"secret_access_key": "s3cr3t-value"}, aad=associated_data(tenant, row))
    assert b"s3cr3t-value" not in blob
    assert box.open(blob, aad=associated_data(tenant, row)) == {
        "secret_access_key": "s3cr3t-value"}
    with pytest.raises(CredentialsUnreadable, match="do not decrypt with this server key"):
        box.open(blob, aad=associated_data(tenant, uuid.uuid4()))
    with pytest.raises(CredentialsUnreadable, match="do not decrypt with this server key"):
        CredentialBox("another-server-key-of-enough-len").open(
            blob, aad=associated_data(tenant, row))
    with pytest.raises(CredentialsUnreadable, match="unknown credentials format"):
        box.open(b"\x02" + blob[1:], aad=associated_data(tenant, row))
