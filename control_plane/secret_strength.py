"""How many random bytes a configured secret can be credited with.

Only the forms a key generator writes count: hex (two digits a byte) or base64 (standard or
URL-safe, padding optional) — ``python -c 'import secrets; print(secrets.token_hex(32))'``.
A string in such an alphabet is still refused when it does not look drawn at random from
it: a short pattern written over and over, or characters spread far less evenly than random
ones ever are (its Shannon entropy per character, measured, below what a random string of
that length and alphabet has by a margin no generated key comes near: readable words such as
``correct-horse-battery-staple-correct-horse`` repeat a few letters).
"""

from __future__ import annotations

import math
from collections import Counter

HEX = frozenset("0123456789abcdefABCDEF")
BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_")
# How far below a random string's expected entropy a key may measure, in bits per character,
# times 1/sqrt(length): about six standard deviations of a random string's measure (one
# generated key in tens of millions would be refused; a readable passphrase is far below).
_MARGIN = 6.0


def random_bytes_in(secret: str) -> int:
    """How many random bytes ``secret`` can be credited with (0: none, as for anything not
    in a generated form, patterned or readable)."""
    text = secret.strip()
    if len(text) < 16 or len(set(text)) < 8 or _repeats(text):
        return 0
    if all(c in HEX for c in text):
        return len(text) // 2 if _looks_random(text, 16) else 0
    body = text.rstrip("=")
    if body and all(c in BASE64 for c in body):
        return len(body) * 6 // 8 if _looks_random(body, 64) else 0
    return 0


def _repeats(text: str) -> bool:
    """True when ``text`` is a shorter string written over and over ("abcabcabc…")."""
    return (text + text).find(text, 1) < len(text)


def entropy_per_char(text: str) -> float:
    """The Shannon entropy of ``text``'s characters, in bits per character."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def expected_entropy(n: int, k: int) -> float:
    """The expected :func:`entropy_per_char` of ``n`` characters drawn uniformly from ``k``:
    each symbol appears ``j`` times with binomial probability."""
    q = 1.0 / k
    total = 0.0
    for j in range(1, n + 1):
        log_p = (math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
                 + j * math.log(q) + (n - j) * math.log1p(-q))
        total -= math.exp(log_p) * (j / n) * math.log2(j / n)
    return k * total


def _looks_random(text: str, k: int) -> bool:
    n = min(len(text), 512)
    return entropy_per_char(text[:n]) >= expected_entropy(n, k) - _MARGIN / math.sqrt(n)
