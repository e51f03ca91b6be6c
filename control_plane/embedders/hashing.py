"""The built-in offline embedder: feature hashing of words and character trigrams.

It needs nothing beyond numpy and knows no synonyms: it finds texts that share words or
word pieces with the query, and does no better than a keyword search on paraphrases.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    name = "memplane-hash-v1"
    dim = 512

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in _features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self.dim] += 1.0 if value >> 63 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm:
                out[row] /= norm
        return out


def _features(text: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(text)]
    grams = [f"#{w[i:i + 3]}" for w in words for i in range(max(1, len(w) - 2))]
    return words + grams
