"""The labelled recall set (memories.json) and recall@k over it, shared by
tests/search/test_recall.py and bench/recall.py."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SET = Path(__file__).parent / "memories.json"


@dataclass(frozen=True)
class Recall:
    embedder: str
    k: int
    recall: float  # mean over queries of |relevant ∩ top-k| / |relevant|
    misses: tuple[str, ...]  # queries whose relevant memories were not all found


def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SET.read_text(encoding="utf-8"))
    return data


def recall_at(embedder: Any, k: int = 5) -> Recall:
    """Plain cosine top-k of every query over every memory (no server, no keyword part)."""
    data = load()
    ids = [m["id"] for m in data["memories"]]
    memories = embedder.embed([m["text"] for m in data["memories"]])
    queries = embedder.embed([q["query"] for q in data["queries"]])
    scores = queries @ memories.T
    total = 0.0
    misses = []
    for row, query in enumerate(data["queries"]):
        top = {ids[i] for i in np.argsort(-scores[row], kind="stable")[:k]}
        relevant = set(query["relevant"])
        found = len(relevant & top) / len(relevant)
        total += found
        if found < 1:
            misses.append(query["id"])
    return Recall(embedder.name, k, total / len(data["queries"]), tuple(misses))
