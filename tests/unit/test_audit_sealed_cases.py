"""The sealed address of an audit row (``control_plane/audit/sealed.py``): its exact form, what
``reveal`` shows for each state of the subject's key, and the redaction of error sentences.

No database and no server: ``reveal`` takes its keys from whoever holds them (the keys
domain's opener); here a table of keys stands in for it and counts the lookups."""

from __future__ import annotations

import base64
import uuid

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy.orm import Session

from control_plane.audit import sealed
from control_plane.errors import KeyServiceUnavailable

TENANT = uuid.UUID("11111111-2222-3333-4444-555555555555")
OTHER_TENANT = uuid.UUID("99999999-2222-3333-4444-555555555555")
KEY_ID = uuid.UUID("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
KEY2_ID = uuid.UUID("0aaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
KEY = bytes(range(32))
KEY2 = bytes(range(100, 132))
NO_SESSION = Session()


class Keys:
    """The subject keys of one tenant by id; ``None`` for a destroyed key, ``"down"`` for a
    key service that cannot unwrap now. Records every lookup."""

    def __init__(self, keys: dict[uuid.UUID, bytes | None | str]) -> None:
        self.keys = keys
        self.asked: list[tuple[uuid.UUID, uuid.UUID]] = []

    def unwrapped(self, session: Session, tenant_id: uuid.UUID,
                  key_id: uuid.UUID) -> bytes | None:
        assert session is NO_SESSION
        self.asked.append((tenant_id, key_id))
        key = self.keys.get(key_id)
        if key == "down":
            raise KeyServiceUnavailable("the key service is down")
        assert key is None or isinstance(key, bytes)
        return key


def raw_of(token: str) -> bytes:
    blob = token.split(":")[2]
    return base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4))


# --- seal: the token's exact form ---------------------------------------------------------

@pytest.mark.parametrize("text", ["", "a", "ab", "abc", "user/u-1 key=k", "é/ü key=ß" * 3])
def test_a_token_is_the_key_id_and_nonce_then_ciphertext_under_the_tenant_and_key(
        text: str) -> None:
    token = sealed.seal(TENANT, KEY_ID, KEY, text)
    prefix, key_hex, blob = token.split(":")
    assert (prefix, key_hex) == ("sealed", KEY_ID.hex)
    assert "=" not in blob and sealed.TOKEN.fullmatch(token) is not None
    raw = raw_of(token)
    assert len(raw) == 12 + len(text.encode()) + 16
    aad = b"memplane-audit-detail-v1" + TENANT.bytes + KEY_ID.bytes
    assert AESGCM(KEY).decrypt(raw[:12], raw[12:], aad) == text.encode()


def test_two_seals_of_one_text_differ_in_their_nonce() -> None:
    one, two = (raw_of(sealed.seal(TENANT, KEY_ID, KEY, "same")) for _ in range(2))
    assert one[:12] != two[:12]


# --- reveal --------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["", "a", "ab", "abc", "abcd", "user/u-1 key=k", "é" * 7])
def test_a_live_key_opens_the_token_in_place(text: str) -> None:
    token = sealed.seal(TENANT, KEY_ID, KEY, text)
    keys = Keys({KEY_ID: KEY})
    got = sealed.reveal(NO_SESSION, keys, TENANT, [f"write user {token} v2"])
    assert got == [f"write user {text} v2"]
    assert keys.asked == [(TENANT, KEY_ID)]


def test_details_without_a_token_are_returned_as_they_are_and_ask_for_no_key() -> None:
    keys = Keys({KEY_ID: KEY})
    details = ["", "read user", "sealed without a colon", "sealed:zz:abc"]
    assert sealed.reveal(NO_SESSION, keys, TENANT, details) == details
    assert keys.asked == []


def test_one_lookup_per_distinct_key_in_a_page() -> None:
    a1 = sealed.seal(TENANT, KEY_ID, KEY, "user/a key=1")
    a2 = sealed.seal(TENANT, KEY_ID, KEY, "user/a key=2")
    b1 = sealed.seal(TENANT, KEY2_ID, KEY2, "user/b key=1")
    keys = Keys({KEY_ID: KEY, KEY2_ID: KEY2})
    got = sealed.reveal(NO_SESSION, keys, TENANT, [a1, b1, f"{a2} and {a1}", "plain", b1])
    assert got == ["user/a key=1", "user/b key=1", "user/a key=2 and user/a key=1", "plain",
                   "user/b key=1"]
    assert keys.asked == [(TENANT, KEY_ID), (TENANT, KEY2_ID)]


def test_a_destroyed_key_shows_erased_and_is_asked_for_once() -> None:
    token = sealed.seal(TENANT, KEY_ID, KEY, "user/u key=k")
    live = sealed.seal(TENANT, KEY2_ID, KEY2, "user/v key=k")
    keys = Keys({KEY_ID: None, KEY2_ID: KEY2})
    got = sealed.reveal(NO_SESSION, keys, TENANT, [f"write {token}", token, live])
    assert got == ["write [erased subject]", "[erased subject]", "user/v key=k"]
    assert keys.asked == [(TENANT, KEY_ID), (TENANT, KEY2_ID)]


def test_a_key_service_that_is_down_leaves_its_tokens_unreadable_and_the_page_loads() -> None:
    down = sealed.seal(TENANT, KEY_ID, KEY, "user/u key=k")
    live = sealed.seal(TENANT, KEY2_ID, KEY2, "user/v key=k")
    keys = Keys({KEY_ID: "down", KEY2_ID: KEY2})
    got = sealed.reveal(NO_SESSION, keys, TENANT, [down, live, f"again {down}"])
    assert got == ["[sealed; unreadable]", "user/v key=k", "again [sealed; unreadable]"]
    assert keys.asked == [(TENANT, KEY_ID), (TENANT, KEY2_ID)]


def test_without_a_key_source_every_token_is_unreadable() -> None:
    token = sealed.seal(TENANT, KEY_ID, KEY, "user/u key=k")
    got = sealed.reveal(NO_SESSION, None, TENANT, [f"write {token}", token, "plain"])
    assert got == ["write [sealed; unreadable]", "[sealed; unreadable]", "plain"]


def test_a_token_moved_to_another_tenant_or_key_id_does_not_open() -> None:
    token = sealed.seal(TENANT, KEY_ID, KEY, "user/u key=k")
    assert sealed.reveal(NO_SESSION, Keys({KEY_ID: KEY}), OTHER_TENANT, [token]) == [
        sealed.UNREADABLE]
    moved = token.replace(KEY_ID.hex, KEY2_ID.hex)
    assert sealed.reveal(NO_SESSION, Keys({KEY2_ID: KEY}), TENANT, [moved]) == [
        sealed.UNREADABLE]


def test_a_damaged_or_malformed_token_is_unreadable_and_the_rest_still_opens() -> None:
    token = sealed.seal(TENANT, KEY_ID, KEY, "user/u key=k")
    blob = token.split(":")[2]
    middle = len(token) - 10  # inside the ciphertext; the last character may be padding bits
    flipped = token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1:]
    under_another_key = sealed.seal(TENANT, KEY_ID, KEY2, "user/u key=k")
    one_char_too_many = f"sealed:{KEY_ID.hex}:{blob}A"  # a base64 length no encoder writes
    short = f"sealed:{KEY_ID.hex}:AAAA"  # three bytes: no room for a nonce
    keys = Keys({KEY_ID: KEY})
    got = sealed.reveal(NO_SESSION, keys, TENANT,
                        [flipped, under_another_key, one_char_too_many, short, token])
    assert got == [sealed.UNREADABLE] * 4 + ["user/u key=k"]
    assert keys.asked == [(TENANT, KEY_ID)]


# --- redact --------------------------------------------------------------------------------

def test_redact_cuts_each_private_string_raw_and_percent_encoded() -> None:
    text = "no memory at user/u 1/x and u%201%2Fx (u 1/x)"
    assert sealed.redact(text, ["u 1/x", None, ""]) == "no memory at user/… and … (…)"


def test_redact_cuts_the_longest_private_string_first() -> None:
    assert sealed.redact("key=abc ref=ab", ["ab", "abc"]) == "key=… ref=…"
    assert sealed.redact("key=abc ref=ab", ["abc", "ab"]) == "key=… ref=…"


def test_redact_without_private_strings_changes_nothing() -> None:
    assert sealed.redact("scope user, key k", []) == "scope user, key k"
    assert sealed.redact("scope user, key k", [None, ""]) == "scope user, key k"
