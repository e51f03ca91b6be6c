"""Search without plaintext in the control plane: a keyed blind index of an entry's words.

An entry's title and summary are cut into words (NFKC, case-folded, split on anything that is
not a letter or digit; a trailing possessive or plural ``s`` is not stripped: no stemming, so
``budget`` does not find ``budgets``). Each distinct word is stored in ``entry_terms`` as
HMAC-SHA256 under a per-tenant key, truncated to 128 bits (32 hex characters). The key is
derived from the server key (``MEMPLANE_SERVER_KEY``) and the tenant id, so the database alone
— a dump, a replica, a backup — cannot test a guessed word against the index.

A search hashes its words the same way and asks for the entries holding every one (AND).

What the index still leaks, to whoever reads the database:
- **equality**: two entries (of one tenant) sharing a word share its term, so co-occurrence is
  visible; terms of different tenants never compare (different keys);
- **frequency**: how many entries hold a term, and how many distinct words each entry has —
  enough for frequency analysis against a known corpus by someone who has the database and
  a guess of the vocabulary (common words are the most frequent terms);
- **access pattern**: the audit log and query logs show which terms were searched for, so
  repeated searches for one word are linkable.
Who also holds the server key can test any guessed word: it is a keyed hash, not encryption.
The words themselves, their order and the summary text never reach the control plane (I7).
"""

from __future__ import annotations

import hmac
import re
import unicodedata
import uuid
from collections.abc import Iterable

from ..plane.data_plane import DataPlane

TERM_HEX = 32  # 128 bits of HMAC-SHA256: collisions are out of reach at any realistic size
MAX_WORD_CHARS = 64  # longer runs (hashes, base64) are not words anyone searches for
MAX_QUERY_WORDS = 16

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words(text: str) -> list[str]:
    """The distinct normalised words of ``text``, in first-seen order."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    found = (w for w in _WORD.findall(folded) if len(w) <= MAX_WORD_CHARS)
    return list(dict.fromkeys(found))


def index_key(plane: DataPlane, tenant_id: uuid.UUID) -> bytes:
    """The tenant's index key, derived from the server key (never stored)."""
    if plane.credentials is None:
        raise RuntimeError("the data plane has no server key; build it through Runtime")
    return plane.credentials.derive_key(b"memplane entry terms v1" + tenant_id.bytes)


def term(key: bytes, word: str) -> str:
    return hmac.digest(key, word.encode(), "sha256")[:TERM_HEX // 2].hex()


def terms(key: bytes, texts: Iterable[str]) -> list[str]:
    """The distinct terms of every word in ``texts``."""
    seen: dict[str, None] = {}
    for text in texts:
        for word in words(text):
            seen.setdefault(term(key, word), None)
    return list(seen)
