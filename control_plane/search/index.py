"""The in-memory side of search: loaded segments (vectors + a keyword index over their
texts) and verified values, in bounded LRU caches. Everything here is derived from objects
in the tenant's bucket; nothing of it is ever written to the control plane (I7).

Both caches are keyed by what never changes under the same key: a segment's id names one
immutable object, and a value is cached under its SHA-256 (only after it hashed to it).
"""

from __future__ import annotations

import math
import re
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

from ..plane.shared_pool import SharedPool
from .codec import Rows

_WORD = re.compile(r"\w+", re.UNICODE)

# BM25 parameters (the usual defaults).
K1 = 1.2
B = 0.75
_WEIGHTS_PER_ROW = 8
_GATHERED = 1 << 17  # floats of a product's columns gathered at a time (512 KiB)
_Weights = list[tuple[np.ndarray, np.ndarray] | None]


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


@dataclass
class Segment:
    """A segment as search uses it: row i is pointer ``ids[i]`` at ``versions[i]``."""

    id: uuid.UUID
    model: str
    ids: list[uuid.UUID]
    versions: np.ndarray
    vectors: np.ndarray
    texts: list[str]
    row_of: dict[uuid.UUID, int]
    lengths: np.ndarray
    postings: dict[str, tuple[np.ndarray, np.ndarray]] = field(repr=False)

    @classmethod
    def of(cls, segment_id: uuid.UUID, rows: Rows) -> Segment:
        return cls(segment_id, rows.model, rows.ids, np.asarray(rows.versions, dtype=np.int64),
                   np.asfortranarray(rows.vectors, dtype=np.float32), rows.texts,
                   {pid: i for i, pid in enumerate(rows.ids)}, *keyword_index(rows.texts))

    def __len__(self) -> int:
        return len(self.ids)

    def scores(self, query: np.ndarray, nonzero: np.ndarray | None) -> np.ndarray:
        """Each row's dot product with ``query``. ``vectors`` is kept column by column, so
        with ``nonzero`` (the query's nonzero dimensions, when few) only those columns are
        read: the hashing embedder's query of a few words has 30 to 50 of 512, a tenth of the
        matrix. Dimensions where the query is zero add exactly nothing to any score."""
        if nonzero is None:
            return self.vectors @ query  # type: ignore[no-any-return]
        weights, columns, rows = query[nonzero], self.vectors.T, len(self.ids)
        # The columns are gathered a block of rows at a time, each block small enough to
        # stay in the core's cache while the product reads it: gathering all of them at
        # once (2 MB for 45 columns of 10,000 rows) and reading them back cost 1.5-2x more.
        block = max(1024, _GATHERED // max(1, len(nonzero)))
        if rows <= block:
            return weights @ columns[nonzero]  # type: ignore[no-any-return]
        out = np.empty(rows, dtype=np.result_type(weights, columns))
        for start in range(0, rows, block):
            out[start:start + block] = weights @ columns[nonzero, start:start + block]
        return out


def sparse_dimensions(query: np.ndarray) -> np.ndarray | None:
    """The query's nonzero dimensions if reading only those columns is cheaper than the
    whole product (at most a quarter of them, measured: a quarter of the columns gathered
    costs about the whole product), else None."""
    nonzero = np.flatnonzero(query)
    return nonzero if len(nonzero) * 4 <= len(query) else None


def keyword_index(texts: list[str]) -> tuple[np.ndarray, dict[str, tuple[np.ndarray,
                                                                          np.ndarray]]]:
    """Each text's length in words, and per word the rows holding it (ascending) with its
    count in each. Each word gets a number (a dictionary look-up per word); numpy sorts and
    counts the (word, row) pairs (a cold search of 100,000 memories builds this for all of them)."""
    found = [words(text) for text in texts]
    lengths = np.fromiter(map(len, found), dtype=np.int64, count=len(found))
    if not lengths.any():
        return lengths.astype(np.float32), {}
    vocabulary = {w: i for i, w in enumerate(dict.fromkeys(chain.from_iterable(found)))}
    term_ids = np.fromiter(map(vocabulary.__getitem__, chain.from_iterable(found)),
                           dtype=np.int64, count=int(lengths.sum()))
    rows = len(texts)
    pairs, counts = np.unique(term_ids * rows + np.repeat(np.arange(len(texts)), lengths),
                              return_counts=True)  # sorted: by word, then by row
    docs = pairs % rows
    tfs = counts.astype(np.float32)
    # Every numbered word has at least one pair: word i's pairs are the i-th run.
    starts = np.flatnonzero(np.diff(pairs // rows)) + 1
    bounds = zip([0, *starts.tolist()], [*starts.tolist(), len(pairs)], strict=True)
    postings = {term: (docs[a:b], tfs[a:b]) for term, (a, b) in zip(vocabulary, bounds,
                                                                   strict=True)}
    return lengths.astype(np.float32), postings


class Keywords:
    """What BM25 needs of a set of segments under their masks, computed once per set (kept
    with the set's deduplication, ``SearchCache.view``): the rows counted, their average
    length and each row's length norm (one float per row: memory bounded by the rows)."""

    def __init__(self, segments: list[Segment], masks: list[np.ndarray]) -> None:
        self.masks = masks  # not the segments: a view must not keep evicted ones alive
        self.full = [bool(m.all()) for m in masks]
        self.total = sum(int(m.sum()) for m in masks)
        lengths = sum(float(s.lengths.sum() if full else s.lengths[m].sum())
                      for s, m, full in zip(segments, masks, self.full, strict=True))
        self.avg = (lengths / self.total if self.total else 0.0) or 1.0
        self.norms = [(K1 * (1.0 - B + B * s.lengths / self.avg)).astype(np.float32)
                      for s in segments]
        # Each query term's BM25 weights, kept for the next searches of this set: at most
        # ``_WEIGHTS_PER_ROW`` per row counted (4 bytes each, beside a vector's 2 KiB).
        self._weights: dict[str, _Weights] = {}
        self._kept = 0

    def weights(self, segments: list[Segment], term: str) -> _Weights:
        """``term``'s BM25 weight in every row holding it — per segment None or (rows,
        weights) — computed once for this set (its frequency and the average length are
        the set's)."""
        found = self._weights.get(term)
        if found is not None:
            return found
        df, hits = self.term(segments, term)
        parts: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(hits)
        if df:
            idf = math.log(1.0 + (self.total - df + 0.5) / (df + 0.5))
            parts = [None if hit is None else
                     (hit[0], idf * hit[1] * (K1 + 1.0) / (hit[1] + hit[2]))
                     for hit in hits]
            for part in parts:
                if part is not None:
                    part[1].flags.writeable = False
        if self._kept + df <= _WEIGHTS_PER_ROW * self.total:
            self._weights[term] = parts
            self._kept += max(df, 1)
        return parts

    def term(self, segments: list[Segment], term: str
             ) -> tuple[int, list[tuple[np.ndarray, ...] | None]]:
        """(document frequency, per segment None or (rows, term frequencies, norms)) of
        ``term`` in ``segments`` (the ones these keywords were computed for)."""
        hits: list[tuple[np.ndarray, ...] | None] = []
        df = 0
        for s, m, full, norms in zip(segments, self.masks, self.full, self.norms,
                                     strict=True):
            posting = s.postings.get(term)
            if posting is None:
                hits.append(None)
                continue
            docs, tfs = posting
            if not full:
                keep = m[docs]
                docs, tfs = docs[keep], tfs[keep]
            hits.append((docs, tfs, norms[docs]))
            df += len(docs)
        return df, hits


def bm25(segments: list[Segment], masks: list[np.ndarray], query: str,
         keywords: Keywords | None = None) -> list[np.ndarray]:
    """BM25 of ``query`` for every row of every segment (rows outside ``masks`` score 0);
    document frequencies and the average length are taken over the rows in the masks
    (``keywords``: those already computed for these segments and masks)."""
    terms = list(dict.fromkeys(words(query)))
    scores = [np.zeros(len(s), dtype=np.float32) for s in segments]
    if keywords is None:
        keywords = Keywords(segments, masks)
    total = keywords.total
    if not terms or total == 0:
        return scores
    for term in terms:
        for score, part in zip(scores, keywords.weights(segments, term), strict=True):
            if part is not None:
                docs, weight = part
                score[docs] += weight
    return scores


class _Lru:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Any) -> Any:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return found[0]

    def put(self, key: Any, value: Any, size: int) -> None:
        if size > self.capacity:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._size -= old[1]
            self._items[key] = (value, size)
            self._size += size
            while self._size > self.capacity and self._items:
                _, (_, dropped) = self._items.popitem(last=False)
                self._size -= dropped

    def forget(self, keys: list[Any]) -> None:
        with self._lock:
            for key in keys:
                old = self._items.pop(key, None)
                if old is not None:
                    self._size -= old[1]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._size = 0


def newest_rows(segments: list[Segment]) -> list[np.ndarray]:
    """Per segment, which rows count: a pointer found in several segments (a snapshot and a
    later delta) counts once, at its newest version."""
    masks = [np.zeros(len(s), dtype=bool) for s in segments]
    best: dict[uuid.UUID, tuple[int, int, int]] = {}
    for s, segment in enumerate(segments):
        for i, (pid, version) in enumerate(zip(segment.ids, segment.versions.tolist(),
                                               strict=True)):
            found = best.get(pid)
            if found is None or found[0] < version:
                best[pid] = (version, s, i)
    for _, s, i in best.values():
        masks[s][i] = True
    return masks


@dataclass(frozen=True)
class SearchState:
    """What a search keeps of the control plane between searches of one tenant and scope
    selection: the embedder, the retention policies (plain rows), the segment rows of the
    embedder's model, and the tokens they were read under (``repository.tokens``). Metadata
    only; a search uses it only after its live filter found the tokens unchanged."""

    embedder: Any
    policies: list[Any]
    rows: list[Any]
    tokens: tuple[Any, frozenset[str], frozenset[str]]
    scopes: list[tuple[str, str]]
    where: list[Any]  # the segment rows' condition (``repository.segment_where``)
    #: The live filter's statements, built on first use (by shape: see the search service).
    statements: dict[Any, Any] = field(default_factory=dict)


MAX_STATES = 10_000


class SearchCache:
    """Loaded segments (bounded by their total rows), the deduplication of each set of
    segments searched together, verified values (by bytes) and each scope selection's
    ``SearchState`` (by count)."""

    def __init__(self, max_rows: int, max_value_bytes: int) -> None:
        self.segments = _Lru(max_rows)
        self.views = _Lru(max_rows)
        self.values = _Lru(max_value_bytes)
        self.states = _Lru(MAX_STATES)
        self._pool = SharedPool(8, "memplane-search-io")

    def pool(self) -> SharedPool:
        """Threads for object reads side by side (values, segments, the indexer's I/O),
        shared by all tenants with no tenant's work waiting behind another's."""
        return self._pool

    def close(self) -> None:
        self._pool.shutdown()

    def view(self, segments: list[Segment]) -> tuple[list[np.ndarray], Keywords]:
        """``newest_rows`` of these segments (read-only arrays) and their ``Keywords``,
        computed once per set."""
        key = tuple(s.id for s in segments)
        found: tuple[list[np.ndarray], Keywords] | None = self.views.get(key)
        if found is None:
            masks = newest_rows(segments)
            for mask in masks:
                mask.flags.writeable = False
            found = (masks, Keywords(segments, masks))
            self.views.put(key, found, max(1, sum(len(s) for s in segments) // 8))
        return found

    def segment(self, segment_id: uuid.UUID) -> Segment | None:
        found: Segment | None = self.segments.get(segment_id)
        return found

    def keep_segment(self, segment: Segment) -> None:
        self.segments.put(segment.id, segment, max(1, len(segment)))

    def value(self, sha256: str) -> tuple[bool, Any]:
        found = self.values.get(sha256)
        return (False, None) if found is None else (True, found[0])

    def keep_value(self, sha256: str, value: Any, size: int) -> None:
        self.values.put(sha256, (value,), size)

    def state(self, key: Any) -> SearchState | None:
        found: SearchState | None = self.states.get(key)
        return found

    def keep_state(self, key: Any, state: SearchState) -> None:
        self.states.put(key, state, 1)

    def forget_state(self, key: Any) -> None:
        self.states.forget([key])

    def clear(self) -> None:
        self.segments.clear()
        self.views.clear()
        self.values.clear()
        self.states.clear()
