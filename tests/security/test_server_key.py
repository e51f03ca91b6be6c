"""The server key (it seals tenants' bucket credentials and derives their index keys) must
be a generated random key: a readable passphrase or a pattern is refused at start-up with a
sentence saying how to generate one, whatever its length."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from pydantic import ValidationError

from control_plane.secret_strength import random_bytes_in
from control_plane.settings import Settings

SHARED = "postgresql+psycopg://u@127.0.0.1:9/db"
REFUSED = ("Value error, MEMPLANE_SERVER_KEY must be a generated random key of at least 16 "
           "bytes (hex or base64; not a passphrase or a pattern) when MEMPLANE_DATABASE_URL "
           "points at a shared database; generate one with: python -c 'import secrets; "
           "print(secrets.token_hex(32))'")


def _settings(tmp_path: Path, server_key: str) -> Settings:
    return Settings(data_dir=tmp_path, database_url=SHARED, server_key=server_key)


@pytest.mark.parametrize("server_key", [
    "correct horse battery staple correct horse",       # the readable passphrase, spaced
    "correct-horse-battery-staple-correct-horse-x",     # the same in the base64url alphabet
    "Correct-Horse-Battery-Staple-42-Correct-Horse",    # with capitals and digits
    "correcthorsebatterystaplecorrecthorsebatterystaple",  # letters only
    "deadbeefcafebabefacefeeddecadebeadedbeefcafebabefacefeeddecade00",  # hex words
    "ab" * 32,                                           # 64 hex digits, but a pattern
    "0123456789abcdef" * 4,
    "0123456789abcdef0123456789",                        # 13 bytes, and a pattern
    secrets.token_hex(8),                                # random, but 8 bytes only
    "changeme-changeme",
], ids=["passphrase", "passphrase-urlsafe", "passphrase-mixed", "passphrase-letters",
        "hex-words", "pattern-hex", "pattern-hex-2", "short-pattern", "short-random",
        "placeholder"])
def test_a_readable_or_patterned_server_key_is_refused(tmp_path: Path, server_key: str) -> None:
    with pytest.raises(ValidationError) as refused:
        _settings(tmp_path, server_key)
    assert [e["msg"] for e in refused.value.errors()] == [REFUSED]


@pytest.mark.parametrize("server_key", [
    secrets.token_hex(32), secrets.token_hex(24), secrets.token_hex(16),
    secrets.token_urlsafe(32), secrets.token_urlsafe(16),
    "0dda8bf06fe7f3cd568650e8597fbf6f365696b19d2f2de85309dd28df422434",  # deploy/compose.yaml
    "9f3c2a7e5b1d4f6a8c0e2b4d6f8a1c3e5b7d9f1a3c5e7b9d",  # tests/deploy
], ids=["hex-32", "hex-24", "hex-16", "urlsafe-32", "urlsafe-16", "compose", "helm-test"])
def test_a_generated_server_key_is_accepted(tmp_path: Path, server_key: str) -> None:
    assert _settings(tmp_path, server_key).server_key is not None


def test_generated_keys_are_credited_in_full() -> None:
    """No generated key is taken for a readable one: 20,000 of each form, each credited
    with every byte it holds."""
    for _ in range(5000):
        assert random_bytes_in(secrets.token_hex(32)) == 32
        assert random_bytes_in(secrets.token_hex(16)) == 16
        assert random_bytes_in(secrets.token_urlsafe(32)) == 32
        assert random_bytes_in(secrets.token_urlsafe(16)) == 16


def test_a_refused_setting_never_shows_its_value(tmp_path: Path) -> None:
    """A start-up error may be logged: it names the setting and the rule, never the value
    (pydantic would otherwise print the input — the key — beside the error)."""
    key = "correct horse battery staple correct horse " + secrets.token_hex(4)
    url = f"postgresql+psycopg://memplane:pw-{secrets.token_hex(6)}@127.0.0.1:9/db"
    with pytest.raises(ValidationError) as refused:
        Settings(data_dir=tmp_path, database_url=url, server_key=key)
    text = f"{refused.value}\n{refused.value!r}"
    assert refused.value.errors()[0]["msg"] == REFUSED
    assert key not in text and key[-8:] not in text
    assert url not in text and url.split(":")[2].split("@")[0] not in text
