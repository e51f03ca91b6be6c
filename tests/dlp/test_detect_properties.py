"""Properties of the detector: every Luhn-valid number is a card, no Luhn-invalid one is, and
redaction never leaves a secret's digits behind; the quick cues never skip a detector the full
ones would run."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from control_plane.dlp import detect
from control_plane.dlp.detect import find, luhn_ok, redact, redact_value


def _check_digit(body: str) -> str:
    for d in "0123456789":
        if luhn_ok(body + d):
            return d
    raise AssertionError("a Luhn check digit always exists")


bodies = st.text(alphabet="0123456789", min_size=12, max_size=18)
separators = st.sampled_from(["", " ", "-"])
prose = st.text(alphabet="abcdefghij .,!?", max_size=30)


def _grouped(digits: str, sep: str) -> str:
    return sep.join(digits[i : i + 4] for i in range(0, len(digits), 4))


@given(bodies, separators, prose, prose)
def test_a_luhn_valid_number_is_found_as_a_card(
        body: str, sep: str, before: str, after: str) -> None:
    number = _grouped(body + _check_digit(body), sep)
    text = f"{before} {number} {after}"
    start = len(before) + 1
    assert [(f.kind, f.start, f.end) for f in find(text, ["card"])] == [
        ("card", start, start + len(number))]


@given(bodies, st.integers(1, 9), separators)
def test_a_luhn_invalid_number_is_not_a_card(body: str, shift: int, sep: str) -> None:
    good = _check_digit(body)
    bad = str((int(good) + shift) % 10)
    assert find(f"ref {_grouped(body + bad, sep)} end", ["card"]) == []


@given(bodies, separators, prose, prose)
def test_redaction_never_leaves_the_card_digits(
        body: str, sep: str, before: str, after: str) -> None:
    digits = body + _check_digit(body)
    text = f"{before} {_grouped(digits, sep)} {after}"
    out = redact(text, find(text))
    assert "[redacted:card]" in out
    assert digits not in "".join(ch for ch in out if ch.isdigit())


@given(st.from_regex(r"[1-8][0-9]{2}", fullmatch=True).filter(lambda a: a != "666"),
       st.integers(1, 99), st.integers(1, 9999), prose)
def test_valid_ssns_are_found_and_redacted(area: str, group: int, serial: int, before: str) -> None:
    ssn = f"{area}-{group:02d}-{serial:04d}"
    text = f"{before} ssn {ssn}."
    redacted, kinds = redact_value({"note": text, "list": [ssn]})
    assert kinds == ["ssn"]
    assert ssn not in str(redacted)
    assert redacted["list"] == ["[redacted:ssn]"]


@given(st.text(max_size=200))
def test_findings_are_sorted_disjoint_and_within_the_text(text: str) -> None:
    findings = find(text)
    last = 0
    for f in findings:
        assert last <= f.start < f.end <= len(text)
        last = f.end


_CUE_TEXT = st.lists(st.sampled_from(
    ["a", "x", "o", "J", "e", "y", "-", "_", "k", "s", "g", "h", "p", "5", "٣", "é", " ",
     *detect._TOKEN_CUES])).map("".join)


@given(_CUE_TEXT)
def test_the_quick_cues_answer_as_the_full_ones(text: str) -> None:
    # a digit (any script's, as \d) and a token's cue: the shortcuts never skip a detector
    assert detect._has_digit(text) is (detect._DIGIT.search(text) is not None)
    assert detect._token_cued(text) is any(cue in text for cue in detect._TOKEN_CUES)


def test_each_tokens_cue_holds_a_character_the_quick_cue_looks_for() -> None:
    assert all("-" in cue or "_" in cue or "J" in cue or cue == "xox"
               for cue in detect._TOKEN_CUES)
