"""Sensitive-data detection: pure functions over text, no I/O, no service imports.

Kinds and the formats recognised (docs/dlp.md is the contract):

- ``card``: a payment card number, 13 to 19 digits, optionally grouped by single spaces or
  dashes, not glued to other digits or letters, passing the Luhn check.
- ``ssn``: a US social security number written ``AAA-GG-SSSS`` (or with spaces), excluding the
  areas 000, 666 and 900-999, the group 00 and the serial 0000.
- ``iban``: an IBAN, a country code, two check digits and 11 to 30 letters or digits (print
  groups of four separated by spaces allowed), whose mod-97 check gives 1.
- ``private_key``: a PEM block ``-----BEGIN ... PRIVATE KEY-----`` through its END line (or to
  the end of the text when the END line is missing).
- ``cloud_key``: AWS access key ids ``AKIA``/``ASIA`` + 16 upper-case letters or digits, an AWS
  secret given as ``aws_secret_access_key = <40 chars>``, Google API keys ``AIza`` + 35, and an
  Azure storage connection string's ``AccountKey=<base64>`` (the span is the key).
- ``bearer_token``: ``Bearer <token>`` (the span is the token), JWT-shaped ``eyJ….eyJ….…``, and
  tokens with a well-known prefix: GitHub ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/
  ``github_pat_``, OpenAI-style ``sk-``, Slack ``xoxb-``/``xoxp-``/``xoxa-``/``xoxr-``/``xoxs-``,
  Stripe ``sk_live_``/``rk_live_``, GitLab ``glpat-``.
- ``password``: ``password: …``, ``password=…``, ``passwd: …``, ``pwd: …``, ``passcode: …``,
  "password is: …" and "my/our/the … password is …" (the span is the secret only: the next
  run of non-blank characters, without surrounding quotes or a trailing period or comma;
  prose such as "my password is not working" is not a secret). A string under a dictionary
  key named ``password``/``passwd``/``passcode``/``passphrase``/``pwd``, or ending in
  ``password``/``passwd``/``passphrase``/``_pwd`` (``db_password``, ``adminPassword``), is one
  as a whole.

A ``Finding`` keeps the kind and the offsets only, never the value.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

KINDS: tuple[str, ...] = (
    "card", "ssn", "iban", "private_key", "cloud_key", "bearer_token", "password",
)


@dataclass(frozen=True)
class Finding:
    """One detected span: ``text[start:end]`` is the sensitive value (never stored here)."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class ValueFinding:
    """A finding inside a JSON value: ``path`` locates the string (keys and list indexes from
    the root; ``()`` is the value itself when it is a string), ``start``/``end`` are offsets
    into that string. Dictionary keys are scanned too: their path ends with ``"<key>"``."""

    kind: str
    path: tuple[str | int, ...]
    start: int
    end: int


_CARD = re.compile(r"(?<![0-9A-Za-z])(?:\d[ -]?){12,18}\d(?![0-9A-Za-z])")
_SSN = re.compile(r"(?<![0-9A-Za-z-])(\d{3})([- ])(\d{2})\2(\d{4})(?![0-9A-Za-z-])")
_IBAN = re.compile(r"(?<![0-9A-Za-z])([A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30})(?![0-9A-Za-z])")
_PEM = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
    r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|.*\Z)",
    re.DOTALL,
)
_CLOUD = (
    re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}(?![A-Za-z0-9_\-])"),
)
_CLOUD_VALUE = (
    re.compile(r"AccountKey=([A-Za-z0-9+/]{20,}={0,2})"),
    re.compile(r"(?i)aws_secret_access_key\s*[=:]\s*[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"),
)
_TOKENS = (
    re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]+\.eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+"),
    re.compile(
        r"(?<![A-Za-z0-9_\-])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
        r"|sk-[A-Za-z0-9_\-]{20,}|xox[bpars]-[A-Za-z0-9\-]{10,}|(?:sk|rk)_live_[A-Za-z0-9]{16,}"
        r"|glpat-[A-Za-z0-9_\-]{20,})"
    ),
)
_BEARER = re.compile(r"(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{8,}=*)")
_PASSWORD = re.compile(
    r"(?i)(?:\b(?:password|passwd|passcode|passphrase|pwd)[\"']?\s*[:=]\s*"
    r"|\b(?:password|passwd|passcode|passphrase)\s+is:\s*"
    r"|\b(?:my|our|the)\s+(?:[a-z0-9-]+\s+)?(?:password|passwd|passcode|passphrase|pin)"
    r"\s+is:?\s+)"
    r"[\"'`]?([^\s\"'`]+)"
)
# Words after "my password is" that are prose, not a secret ("my password is not working").
_PROSE = frozenset(
    "not wrong incorrect invalid too the a an same expired correct still now never always "
    "required missing weak strong different locked changed reset set being stored saved "
    "needed empty blank valid updated case-sensitive secret hidden".split()
)
# Dictionary keys whose string value is a password as a whole.
PASSWORD_KEYS = frozenset({"password", "passwd", "passcode", "passphrase", "pwd"})


def luhn_ok(digits: str) -> bool:
    """Whether a string of digits passes the Luhn check."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def iban_ok(iban: str) -> bool:
    """Whether an IBAN (spaces allowed) passes the ISO 7064 mod-97 check."""
    s = iban.replace(" ", "").upper()
    if len(s) < 15 or len(s) > 34 or not s[:2].isalpha() or not s[2:4].isdigit():
        return False
    moved = s[4:] + s[:4]
    number = "".join(str(int(ch, 36)) for ch in moved)
    return int(number) % 97 == 1


def _cards(text: str) -> Iterable[Finding]:
    for m in _CARD.finditer(text):
        span = m.group(0)
        digits = span.replace(" ", "").replace("-", "")
        if 13 <= len(digits) <= 19 and luhn_ok(digits):
            yield Finding("card", m.start(), m.end())


def _ssns(text: str) -> Iterable[Finding]:
    for m in _SSN.finditer(text):
        area, group, serial = m.group(1), m.group(3), m.group(4)
        if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
            continue
        yield Finding("ssn", m.start(), m.end())


def _ibans(text: str) -> Iterable[Finding]:
    for m in _IBAN.finditer(text):
        span = m.group(1)
        # The greedy match may run into a following upper-case word ("... 00 AND"): try the
        # whole run, then each prefix that ends at a space.
        cuts = [len(span)] + [i for i in range(len(span) - 1, 14, -1) if span[i] == " "]
        for cut in cuts:
            if iban_ok(span[:cut]):
                yield Finding("iban", m.start(1), m.start(1) + cut)
                break


def _private_keys(text: str) -> Iterable[Finding]:
    for m in _PEM.finditer(text):
        yield Finding("private_key", m.start(), m.end())


def _cloud_keys(text: str) -> Iterable[Finding]:
    for rx in _CLOUD:
        for m in rx.finditer(text):
            yield Finding("cloud_key", m.start(), m.end())
    for rx in _CLOUD_VALUE:
        for m in rx.finditer(text):
            yield Finding("cloud_key", m.start(1), m.end(1))


def _bearer_tokens(text: str) -> Iterable[Finding]:
    for rx in _TOKENS:
        for m in rx.finditer(text):
            yield Finding("bearer_token", m.start(), m.end())
    for m in _BEARER.finditer(text):
        if not any(ch.isdigit() for ch in m.group(1)):
            continue
        yield Finding("bearer_token", m.start(1), m.end(1))


def _passwords(text: str) -> Iterable[Finding]:
    for m in _PASSWORD.finditer(text):
        start, end = m.start(1), m.end(1)
        if text.startswith("[redacted:", start):  # already redacted: redaction is idempotent
            continue
        while end > start and text[end - 1] in ".,;:!?)]}":
            end -= 1
        if end > start and text[start:end].lower() not in _PROSE:
            yield Finding("password", start, end)


_DETECTORS = {
    "card": _cards,
    "ssn": _ssns,
    "iban": _ibans,
    "private_key": _private_keys,
    "cloud_key": _cloud_keys,
    "bearer_token": _bearer_tokens,
    "password": _passwords,
}


def _selected(kinds: Iterable[str] | None) -> tuple[str, ...]:
    if kinds is None or kinds is KINDS:
        return KINDS
    return _selected_tuple(tuple(kinds))


# Cheap cues (a digit, a marker) tell which detectors could match a string, so most strings
# — prose, labels — cost a few substring checks, not every pattern.
_DIGIT = re.compile(r"\d")
_TOKEN_CUES = ("eyJ", "sk-", "xox", "_live_", "glpat-", "github_pat_", "ghp_", "gho_", "ghu_",
               "ghs_", "ghr_")
_SHORTEST = 5  # "pwd:x": no shorter string holds anything detected


def _has_digit(text: str) -> bool:
    """``_DIGIT.search(text)``: in ASCII text (\\d's only digits there are 0-9) by looking
    for each digit, a twentieth of the regular expression's time over a long string."""
    if not text.isascii():
        return _DIGIT.search(text) is not None
    return any(digit in text for digit in "0123456789")


def _token_cued(text: str) -> bool:
    """Whether ``text`` holds a token's cue: looked for only in a string holding a
    character one of them must ("-", "_", "J", or "xox" itself)."""
    if "-" not in text and "_" not in text and "J" not in text and "xox" not in text:
        return False
    return any(cue in text for cue in _TOKEN_CUES)


def _cued(text: str, selected: tuple[str, ...]) -> list[str]:
    """The selected kinds whose detector could match ``text``."""
    lower = text.lower()
    cued: set[str] = set()
    if _has_digit(text):
        cued.update(("card", "ssn", "iban"))
    if "PRIVATE KEY" in text:
        cued.add("private_key")
    if ("AKIA" in text or "ASIA" in text or "AIza" in text or "AccountKey=" in text
            or "aws_secret_access_key" in lower):
        cued.add("cloud_key")
    if "bearer" in lower or _token_cued(text):
        cued.add("bearer_token")
    if "pass" in lower or "pwd" in lower or "pin" in lower:
        cued.add("password")
    return [k for k in selected if k in cued]


@functools.lru_cache(maxsize=256)
def _selected_tuple(kinds: tuple[str, ...]) -> tuple[str, ...]:
    chosen = set(kinds)
    unknown = chosen - set(KINDS)
    if unknown:
        raise ValueError(f"unknown kind(s) {sorted(unknown)}; the kinds are {', '.join(KINDS)}")
    return tuple(k for k in KINDS if k in chosen)


def find(text: str, kinds: Iterable[str] | None = None) -> list[Finding]:
    """Every sensitive span in ``text`` of the given kinds (all kinds when ``None``), sorted by
    start, overlapping spans merged into the earliest-starting (then longest) finding.
    An unknown kind raises ``ValueError`` naming the known ones."""
    selected = _selected(kinds)
    if len(text) < _SHORTEST:
        return []
    found: list[Finding] = []
    for kind in _cued(text, selected):
        found.extend(_DETECTORS[kind](text))
    found.sort(key=lambda f: (f.start, -(f.end - f.start), KINDS.index(f.kind)))
    merged: list[Finding] = []
    for f in found:
        if merged and f.start < merged[-1].end:
            last = merged[-1]
            if f.end > last.end:
                merged[-1] = Finding(last.kind, last.start, f.end)
            continue
        merged.append(f)
    return merged


def kinds_of(findings: Iterable[Finding | ValueFinding]) -> list[str]:
    """The distinct kinds of ``findings``, in ``KINDS`` order."""
    seen = {f.kind for f in findings}
    return [k for k in KINDS if k in seen]


def redact(text: str, findings: Iterable[Finding]) -> str:
    """``text`` with each finding's span replaced by ``[redacted:<kind>]``."""
    out: list[str] = []
    pos = 0
    for f in sorted(findings, key=lambda f: f.start):
        if f.start < pos:
            continue
        out.append(text[pos : f.start])
        out.append(f"[redacted:{f.kind}]")
        pos = f.end
    out.append(text[pos:])
    return "".join(out)


def _password_key(key: str) -> bool:
    return key in PASSWORD_KEYS or key.endswith(("password", "passwd", "passphrase", "_pwd"))


def _whole_password(key: Any, value: Any, selected: tuple[str, ...]) -> bool:
    return (
        "password" in selected
        and isinstance(key, str)
        and _password_key(key.strip().lower())
        and isinstance(value, str)
        and bool(value.strip())
    )


def _walk(
    value: Any, path: tuple[str | int, ...], selected: tuple[str, ...]
) -> Iterable[ValueFinding]:
    if isinstance(value, str):
        yield from (ValueFinding(f.kind, path, f.start, f.end) for f in find(value, selected))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str):
                keypath = (*path, f"<key>{k}")
                for f in find(k, selected):
                    yield ValueFinding(f.kind, keypath, f.start, f.end)
            if _whole_password(k, v, selected):
                yield ValueFinding("password", (*path, k), 0, len(v))
            else:
                yield from _walk(v, (*path, k), selected)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _walk(v, (*path, i), selected)


def find_in_value(value: Any, kinds: Iterable[str] | None = None) -> list[ValueFinding]:
    """Findings in every string of a JSON value. Each finding's ``path`` names the string
    (keys and list indexes from the root, ``()`` when the value is itself a string; a dict key
    that itself holds a finding is ``"<key>NAME"`` at the end of its parent's path) and
    ``start``/``end`` are offsets into that string. A string under a key named like a password
    (``password``, ``passwd``, ``passcode``, ``passphrase``, ``pwd``) is a password as a whole."""
    return list(_walk(value, (), _selected(kinds)))


def redact_value(value: Any, kinds: Iterable[str] | None = None) -> tuple[Any, list[str]]:
    """A copy of a JSON value with every detected span in its strings (dict keys included)
    replaced by ``[redacted:<kind>]``, and the kinds found (in ``KINDS`` order). A string under
    a password-named key becomes ``[redacted:password]`` as a whole."""
    selected = _selected(kinds)
    seen: set[str] = set()

    def go(v: Any) -> Any:
        if isinstance(v, str):
            fs = find(v, selected)
            if not fs:
                return v
            seen.update(f.kind for f in fs)
            return redact(v, fs)
        if isinstance(v, Mapping):
            out: dict[Any, Any] = {}
            for k, x in v.items():
                if _whole_password(k, x, selected):
                    seen.add("password")
                    out[go(k)] = "[redacted:password]"
                else:
                    out[go(k) if isinstance(k, str) else k] = go(x)
            return out
        if isinstance(v, list):
            return [go(x) for x in v]
        if isinstance(v, tuple):
            return tuple(go(x) for x in v)
        return v

    redacted = go(value)
    return redacted, [k for k in KINDS if k in seen]
