"""An exact table of what the detector finds (kind and the exact span) and what it leaves alone."""

from __future__ import annotations

import pytest

from control_plane.dlp.detect import (
    KINDS,
    Finding,
    ValueFinding,
    find,
    find_in_value,
    iban_ok,
    luhn_ok,
    redact,
    redact_value,
)

GCP = "AIzaSyA-1234567890abcdefghijklmnopqrstu"
AZURE_KEY = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3A=="
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXBhcnQ"
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4\n"
       "-----END RSA PRIVATE KEY-----")
HEAD = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg"

# (text, the secret inside it, its kind): the finding is exactly that secret's span.
POSITIVE = [
    ("card 4111 1111 1111 1111 on file", "4111 1111 1111 1111", "card"),
    ("4111-1111-1111-1111", "4111-1111-1111-1111", "card"),
    ("pay with 5555555555554444.", "5555555555554444", "card"),
    ("amex 378282246310005", "378282246310005", "card"),
    ("ssn 123-45-6789", "123-45-6789", "ssn"),
    ("SSN: 078 05 1120 ok", "078 05 1120", "ssn"),
    ("iban GB82 WEST 1234 5698 7654 32 please", "GB82 WEST 1234 5698 7654 32", "iban"),
    ("to DE89370400440532013000 AND more", "DE89370400440532013000", "iban"),
    (f"key:\n{PEM}\nend", PEM, "private_key"),
    (HEAD, HEAD, "private_key"),
    ("aws AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE", "cloud_key"),
    ("sts ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A", "cloud_key"),
    (f"maps key {GCP}", GCP, "cloud_key"),
    (f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={AZURE_KEY};EndpointSuffix=core",
     AZURE_KEY, "cloud_key"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "cloud_key"),
    ("Authorization: Bearer abc123def456ghi789", "abc123def456ghi789", "bearer_token"),
    (f"token {JWT} expires", JWT, "bearer_token"),
    (f"GITHUB_TOKEN={GHP}", GHP, "bearer_token"),
    ("OPENAI sk-proj1234567890abcdefghij", "sk-proj1234567890abcdefghij", "bearer_token"),
    ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij", "bearer_token"),
    ("password: hunter2", "hunter2", "password"),
    ("db password=s3cr3t!x;", "s3cr3t!x", "password"),
    ('{"password": "Tr0ub4dor&3"}', "Tr0ub4dor&3", "password"),
    ("pwd: 'q1w2e3'", "q1w2e3", "password"),
    ("My password is correcthorsebattery.", "correcthorsebattery", "password"),
    ("our wifi password is BlueFox42, thanks", "BlueFox42", "password"),
    ("The root password is: s3cret", "s3cret", "password"),
    ("the admin password is Tango-55", "Tango-55", "password"),
]

NEGATIVE = [
    "card 4111 1111 1111 1112 on file",          # fails Luhn
    "order 1234567812345678",                    # fails Luhn
    "12345678901234567890123",                   # too long to be a card
    "a version 4111111111111111x1",              # glued to letters
    "ssn 000-12-3456", "ssn 666-12-3456", "ssn 912-34-5678", "ssn 123-00-4567", "ssn 123-45-0000",
    "call 555-123-4567",                         # a phone number, not AAA-GG-SSSS
    "iban GB82 WEST 1234 5698 7654 33",          # wrong check digits
    "-----BEGIN PUBLIC KEY-----\nMFwwDQYJKoZIhvcNAQEBBQADSwAwSAJBAKj34GkxFhD9",
    "AKIA1234",                                  # too short
    "the bearer of this letter",                 # no token
    "reset your password to continue",
    "my password is not working",
    "password reset required",
    "the password is required",
    "the password is case-sensitive",
    "your password is too weak",
    "I prefer responses in bullet points",
    "",
]


@pytest.mark.parametrize(("text", "secret", "kind"), POSITIVE)
def test_each_positive_example_is_found_with_its_exact_span(
        text: str, secret: str, kind: str) -> None:
    start = text.index(secret)
    assert find(text) == [Finding(kind, start, start + len(secret))]


@pytest.mark.parametrize("text", NEGATIVE)
def test_each_negative_example_finds_nothing(text: str) -> None:
    assert find(text) == []


def test_kinds_limit_detection_and_an_unknown_kind_is_refused() -> None:
    text = "ssn 123-45-6789 and card 4111111111111111"
    assert [f.kind for f in find(text)] == ["ssn", "card"]
    assert [f.kind for f in find(text, ["card"])] == ["card"]
    assert find(text, []) == []
    with pytest.raises(ValueError, match="the kinds are card, ssn, iban"):
        find(text, ["card", "passport"])
    assert KINDS == ("card", "ssn", "iban", "private_key", "cloud_key", "bearer_token", "password")


def test_redact_replaces_each_span_with_its_kind() -> None:
    text = "ssn 123-45-6789, card 4111 1111 1111 1111, password: hunter2."
    assert redact(text, find(text)) == (
        "ssn [redacted:ssn], card [redacted:card], password: [redacted:password].")


def test_find_in_value_walks_every_string_and_names_where() -> None:
    value = {"profile": {"cards": ["none", "4111111111111111"]}, "password": "hunter2",
             "note 123-45-6789": 3, "n": 5}
    assert find_in_value(value) == [
        ValueFinding("card", ("profile", "cards", 1), 0, 16),
        ValueFinding("password", ("password",), 0, 7),
        ValueFinding("ssn", ("<key>note 123-45-6789",), 5, 16),
    ]
    assert find_in_value("ssn 123-45-6789") == [ValueFinding("ssn", (), 4, 15)]
    assert find_in_value(42) == []


def test_redact_value_keeps_the_shape_and_names_the_kinds() -> None:
    value = {"a": ["x 4111111111111111", 3, None], "password": "hunter2", "ok": "fine"}
    redacted, kinds = redact_value(value)
    assert redacted == {"a": ["x [redacted:card]", 3, None], "password": "[redacted:password]",
                        "ok": "fine"}
    assert kinds == ["card", "password"]
    assert redact_value({"password": "hunter2"}, ["card"]) == ({"password": "hunter2"}, [])


def test_the_check_functions() -> None:
    assert luhn_ok("79927398713") and not luhn_ok("79927398710")
    assert iban_ok("GB82 WEST 1234 5698 7654 32") and not iban_ok("GB82 WEST 1234 5698 7654 33")
    assert not iban_ok("GB82")


def test_redaction_is_idempotent() -> None:
    text = ("password: hunter2, my password is abc123, pwd='x1', Bearer abc123def456ghi789, "
            "ssn 123-45-6789, card 4111111111111111")
    once = redact(text, find(text))
    assert find(once) == []
    assert redact(once, find(once)) == once
