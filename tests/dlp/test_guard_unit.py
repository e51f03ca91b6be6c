"""``screen``'s decisions for a given policy (no database): each mode, the kinds filter, an
extracted value refused whatever the mode, and the service's own writes redacted, not
refused."""

from __future__ import annotations

import uuid

import pytest

from control_plane.dlp.detect import KINDS
from control_plane.dlp.guard import Screened, SensitiveData, screen, screen_parts
from control_plane.dlp.policy import Policy

TENANT = uuid.uuid4()
VALUE = {"msg": "card 4111111111111111, ssn 123-45-6789"}


def test_each_mode() -> None:
    assert screen(Policy("off", KINDS), TENANT, VALUE, ["a"], what="the value") == Screened(
        VALUE, ["a"])
    assert screen(Policy("flag", KINDS), TENANT, VALUE, ["a"], what="the value") == Screened(
        VALUE, ["a", "sensitive:card", "sensitive:ssn"], ("card", "ssn"))
    assert screen(Policy("redact", KINDS), TENANT, VALUE, None, what="the value") == Screened(
        {"msg": "card [redacted:card], ssn [redacted:ssn]"}, None, ("card", "ssn"))
    with pytest.raises(SensitiveData) as refused:
        screen(Policy("refuse", KINDS), TENANT, VALUE, None, what="the value")
    assert refused.value.status_code == 422 and refused.value.code == "sensitive_data"
    assert refused.value.extra == {"kinds": ["card", "ssn"]}
    assert refused.value.detail.startswith(
        "the value holds a payment card number and a US social security number (at the "
        "value.msg); remove it")
    assert "4111" not in refused.value.detail and "6789" not in refused.value.detail


def test_the_kinds_filter() -> None:
    only_ssn = Policy("redact", ("ssn",))
    assert screen(only_ssn, TENANT, VALUE, None, what="the value").value == {
        "msg": "card 4111111111111111, ssn [redacted:ssn]"}
    assert screen(Policy("refuse", ()), TENANT, VALUE, None, what="v") == Screened(VALUE, None)


@pytest.mark.parametrize("mode", ["off", "flag", "redact", "refuse"])
def test_an_extracted_value_is_refused_whatever_the_mode(mode: str) -> None:
    with pytest.raises(SensitiveData) as refused:
        screen(Policy(mode, ("card",)), TENANT, "my password is hunter2", None,
               what="the extracted memory", extracted=True)
    assert refused.value.extra == {"kinds": ["password"]}
    assert refused.value.detail == ("the extracted memory holds a password; an extracted "
                                    "memory never stores one")
    assert screen(Policy(mode, KINDS), TENANT, "I prefer bullet points", ["pref"],
                  what="the extracted memory", extracted=True) == Screened(
        "I prefer bullet points", ["pref"])


def test_the_services_own_writes_are_redacted_under_refuse() -> None:
    parts = {"summary": ("the summary", "user said pwd: hunter2")}
    got = screen_parts(Policy("refuse", KINDS), TENANT, parts, None, system=True)
    assert got == Screened({"summary": "user said pwd: [redacted:password]"}, None,
                           ("password",))


def test_a_key_holding_a_secret_is_never_quoted_in_the_sentence() -> None:
    value = {"4111111111111111": {"note": "ssn 123-45-6789"}}
    with pytest.raises(SensitiveData) as refused:
        screen(Policy("refuse", KINDS), TENANT, value, None, what="the value")
    assert refused.value.detail.startswith(
        "the value holds a payment card number and a US social security number (at the "
        "value (a key), the value.….note); ")
