"""Search: the top memories, entries and knowledge chunks for a query (``POST /v1/search``),
also called by other services (context assembly).

  1. the scopes searched: the one given, else every scope with a segment the key may see;
  2. their segments (snapshot + deltas), from the in-memory cache or the bucket — a cold
     scope costs 1 + at most ``indexer.COMPACT_AFTER`` object reads, a warm one none;
  3. the query embedded by the tenant's embedder; cosine of every row (one matrix product
     per segment) and BM25 of the rows' texts (held in the cache, never in the database);
  4. reciprocal rank fusion of the two rankings: score = 1/(60 + vector rank) +
     1/(60 + keyword rank) (a row without any query word has no keyword rank); the ranks
     are the indexed rows', so a candidate's score does not depend on another's liveness;
  5. the live filter, one SQL statement over the best-scored candidates (``first_check``;
     the next ones only if too few of those are live): a candidate counts only if its
     pointer is synced, not expired nor past a retention policy, at the version the vector
     was made for, in the key's scopes and matching the filters — deletions, overwrites and
     erasures drop out at once. The tenant's embedder, policies and the scope's segment
     rows are kept in memory between searches (``SearchState``); the same statement reads
     their tokens, and a changed token means: read them again and rank again
     (``_read_state``);
  6. values verified like reads (I3), through a cache keyed by SHA-256: a mismatch marks the
     pointer corrupt, audits the failure and drops the result;
  7. one ``search`` audit row (the filters as given/not given and the count, never the
     query) and one ``read`` row per value served, committed before the answer (I6). When
     no value is served: on PostgreSQL, written by the live statement that ends the search
     (``repo._AUDITED``: one round trip), else through the group commit reads use.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters.envelope import DecryptionError, sealed_size

from ..addresses import nfc
from ..audit import service as audit
from ..audit.service import audited
from ..db import direct
from ..db.base import utcnow
from ..db.engine import begin_write
from ..embedders import EmbedderFailed, Running
from ..embedders.service import embedder_for
from ..errors import Conflict, InvalidInput, StorageUnavailable
from ..identity import EVERYTHING, Access, Actor
from ..keys import subject_keys as keys
from ..kit import request_id_var, sha256_hex
from ..memories import repository as memories_repo
from ..memories import visibility
from ..memories.shared import given, keyring_of
from ..tenants.access import ensure_visible as access_check
from . import repository as repo
from . import store
from .index import SearchCache, SearchState, Segment, bm25, sparse_dimensions
from .schemas import SearchIn

RRF_K = 60
_POOL = 4  # candidates taken from each ranking: limit * _POOL (at least 32)
_ATTEMPTS = 3  # rankings of one search whose kept state the live filter found stale


class Searching(Running, Protocol):
    """What a search uses of the running server (``control_plane.runtime.Runtime`` is one):
    its settings and data plane (the tenant's embedder, the objects' reads), sessions for
    the reads it spreads over threads, and its search cache."""

    search_cache: SearchCache

    def sessions(self) -> Session: ...


@dataclass(frozen=True)
class SearchHit:
    kind: str
    pointer_id: uuid.UUID
    scope: str
    scope_ref: str
    key: str | None
    title: str | None
    memory_type: str
    tags: list[str]
    score: float
    value: Any
    text: str
    #: The pointer's row as the live filter read it (id, version, storage_path,
    #: content_sha256, subject_user_id, …): attribute access like a MemoryPointer.
    pointer: Any = field(repr=False)


@dataclass(frozen=True)
class SearchResults:
    hits: list[SearchHit]
    embedder: str
    took_ms: float


def kind_of(pointer: Any) -> str:
    if pointer.key is None and pointer.memory_type == "entry":
        return "entry"
    return "knowledge" if pointer.memory_type == "knowledge" else "memory"


def cache_of(runtime: Searching) -> SearchCache:
    cache: SearchCache | None = getattr(runtime, "search_cache", None)
    if cache is None:
        raise RuntimeError("the runtime has no search cache")
    return cache


def search(session: Session, runtime: Searching, actor: Actor, request: SearchIn, *,
           access: Access = EVERYTHING) -> SearchResults:
    """The ``request.limit`` best hits for the query among what the key may see."""
    started = time.perf_counter()
    cache = cache_of(runtime)
    scope = request.scope.canonical if request.scope is not None else None
    scope_ref = nfc(request.scope_ref) if request.scope_ref is not None else None
    detail = (f"scope={scope} ref={given(scope_ref)} user={given(request.user_id)} "
              f"type={request.memory_type} tags={len(request.tags)}")
    with audited(session, actor, "search", detail=detail,
                 private=(scope_ref, request.user_id)):
        if scope_ref is not None and scope is None:
            raise InvalidInput("scope_ref needs scope: send both, or neither to search every "
                               "scope the key may see")
        if scope is not None and scope_ref is not None:
            access_check(session, actor, access, scope, scope_ref, operation="search",
                         what=f"{scope} scope", missing=f"no scope {scope}/{scope_ref}")
        key = (actor.tenant_id, scope, scope_ref, access if scope_ref is None else None)
        state = cache.state(key)
        # PostgreSQL, no values served: the live statement may write the search's audit row
        # itself (``repo._AUDITED``), sparing the audit batcher's round trip.
        in_statement = None
        if (not request.include_values and runtime.plane.audit_batcher is not None
                and session.get_bind().dialect.name == "postgresql"):
            in_statement = repo.audit_row(actor, f"{detail} -> ", request_id_var.get(),
                                          utcnow(), request.limit)
        audited_by_statement = False
        for attempt in range(_ATTEMPTS):
            if state is None:
                state = _read_state(session, runtime, cache, actor.tenant_id, key,
                                    repo.segment_where(actor.tenant_id, scope, scope_ref,
                                                       access))
            segments = _load(session, runtime, cache, actor.tenant_id, state.rows)
            try:
                query = state.embedder.embed([request.query])[0]
            except EmbedderFailed as exc:
                raise StorageUnavailable(f"the embedder is unavailable right now "
                                         f"({exc.code}); retry later") from None
            ranked = _rank(session, cache, actor, access, request, segments, query, state,
                           in_statement, last=attempt == _ATTEMPTS - 1)
            if ranked is not None:
                hits, audited_by_statement = ranked
                break
            cache.forget_state(key)  # the kept state is stale: read it again, rank again
            state = None
        else:
            raise Conflict("the search index kept changing during the search; retry")
        if request.include_values:
            hits = _with_values(session, runtime, cache, actor, hits)
        if not audited_by_statement:  # else the live statement wrote and committed it
            _commit_rows(session, runtime, actor, f"{detail} -> {len(hits)}", hits,
                         request.include_values)
    return SearchResults(hits, state.embedder.name, (time.perf_counter() - started) * 1000.0)


def _commit_rows(session: Session, runtime: Searching, actor: Actor, detail: str,
                 hits: list[SearchHit], values: bool) -> None:
    """The search's row, and a read row per value served, committed before the answer
    (I6)."""
    batcher = runtime.plane.audit_batcher
    if not values and batcher is not None:  # one row: the group commit reads use
        batcher.record(actor.tenant_id, actor.accessor_type, actor.accessor_id, "search",
                       detail=detail, agent_id=actor.agent_id)
        return
    audit.commit_reads(session, runtime.plane, actor, [
        ("search", None, detail),
        *(("read", h.pointer_id, f"{h.scope} v{h.pointer.version} search result")
          for h in hits if values)])


def _read_state(session: Session, runtime: Searching, cache: SearchCache, tenant_id: uuid.UUID,
                key: Any, where: list[Any]) -> SearchState:
    """The tenant's embedder, retention policies and the searched segment rows, read from
    the control plane, kept for the next searches unless another model's segments are
    found (those are queued for re-embedding, as on every search until they are gone)."""
    token = repo.read_tokens(session, tenant_id, where)  # first: a change after it shows
    try:
        embedder = embedder_for(session, runtime, tenant_id)
    except EmbedderFailed as exc:
        raise StorageUnavailable(f"the embedder is unavailable right now ({exc.code}); "
                                 "retry later") from None
    policies = list(visibility.policy_rows(session, tenant_id))
    rows = list(repo.segment_rows(session, where))
    session.commit()
    others = {(r.scope_type, r.scope_ref) for r in rows if r.embedding_model != embedder.name}
    rows = [r for r in rows if r.embedding_model == embedder.name]
    state = SearchState(embedder, policies, rows, _tokens(token),
                        sorted({(r.scope_type, r.scope_ref) for r in rows}), where)
    if others:
        begin_write(session)
        for s, ref in sorted(others):
            repo.reembed_other_models(session, tenant_id, s, ref, embedder.name)
        session.commit()
    else:
        cache.keep_state(key, state)
    return state


def _current(kept: Any, live: Any, last: bool) -> bool:
    """Whether a state kept with tokens ``kept`` may rank when the live filter reads
    ``live``: the same tokens; or, on a search's last attempt, the same embedder and
    policies, whatever the segments did since (an indexer adding segments of the tenant's
    writes, a compaction merging them): else a busy tenant's search would be refused after
    ranking three times. Segments decide only which memories are candidates: every hit still
    passes the live filter (synced, not expired, not past a kept policy, at the version its
    vector was made for), so the ranking may miss the newest memories and never shows one
    that is gone, overwritten, erased or hidden. Policies and the embedder are in the filter
    and the vectors themselves: a change of either always ranks again."""
    if kept == live:
        return True
    if not (last and isinstance(kept, tuple) and isinstance(live, tuple)):
        return False
    return bool(kept[0] == live[0] and kept[1] == live[1])


def _tokens(row: Any) -> tuple[Any, frozenset[str], frozenset[str]]:
    embedder = None if row.t_embedder is None else repo.raw_uuid(row.t_embedder)
    return (embedder, repo.token_set(row.t_policies), repo.token_set(row.t_segments))


def _load(session: Session, runtime: Searching, cache: SearchCache, tenant_id: uuid.UUID,
          rows: Sequence[Any]) -> list[Segment]:
    missing = [r for r in rows if cache.segment(r.id) is None]
    if len(missing) > 1:  # cold: read the segments side by side
        cache.pool().map(tenant_id, runtime.plane.bulkheads,
                         lambda r: _load_one(runtime, cache, r), missing)
    found = []
    for row in rows:
        segment = cache.segment(row.id)
        if segment is None:
            try:
                segment = store.load_segment(session, runtime.plane, cache, row)
            except store.IndexObjectUnreadable:
                continue  # replaced by a compaction meanwhile, or damaged: rebuilt by the next
        found.append(segment)
    if session.in_transaction():
        session.commit()
    return found


def _load_one(runtime: Searching, cache: SearchCache, row: Any) -> None:
    with runtime.sessions() as session:
        try:
            store.load_segment(session, runtime.plane, cache, row)
        except store.IndexObjectUnreadable:
            pass


def _top(scores: np.ndarray, n: int) -> np.ndarray:
    if len(scores) <= n:
        return np.argsort(-scores, kind="stable")
    # Partitioned on the negated scores: from the high end, around many equal values (the
    # zeros of a keyword ranking, the -inf of rows filtered out), numpy's selection takes
    # ten times as long.
    part = np.argpartition(-scores, n)[:n]
    return part[np.argsort(-scores[part], kind="stable")]


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _rank(session: Session, cache: SearchCache, actor: Actor, access: Access,
          request: SearchIn, segments: list[Segment], query: np.ndarray,
          state: SearchState, in_statement: dict[str, Any] | None = None,
          last: bool = False) -> tuple[list[SearchHit], bool] | None:
    """The hits, ranked, and whether the live filter's last statement wrote the search's
    audit row (``in_statement``: that row, see ``repo.audit_values``); None if the live
    filter found ``state`` stale (read it again; on the ``last`` attempt, see ``_current``)."""
    now = utcnow()
    scopes = state.scopes
    wrote_audit = False

    dialect = session.get_bind().dialect

    def live_of(ids: Sequence[uuid.UUID] | None, versions: list[int] | None = None,
                found: int = 0, final: bool = True) -> dict[str, Any] | None:
        """The live filter, one statement (rows by pointer id in hex); it also reads the
        tokens of ``state``, and with ``in_statement`` and ``ids`` may write the audit row
        (``versions``: the candidates', ``found``: hits so far, ``final``: none left)."""
        nonlocal wrote_audit
        shape = (ids is not None, ids is None and request.user_id is not None,
                 ids is None and request.memory_type is not None, access)
        statement = state.statements.get(shape)
        if statement is None:
            statement = state.statements[shape] = repo.live_statement(
                actor.tenant_id, scopes, policies=state.policies, by_ids=shape[0],
                user_id=shape[1], memory_type=shape[2], access=access, where=state.where,
                dialect=dialect)
        parameters = repo.live_parameters(state.policies, now)
        if ids is not None:
            parameters["ids"] = direct.id_list(ids, dialect)
        else:
            parameters |= {"user_id": request.user_id, "memory_type": request.memory_type}
        audit = (None if in_statement is None or ids is None else repo.audit_values(
            in_statement, state.tokens, versions or [], found, final))
        token, rows = repo.live_with_tokens(session, statement, parameters,
                                            request.tags if ids is None else (), audit)
        if not _current(state.tokens, _tokens(token), last):
            return None
        wrote_audit = audit is not None and token.audited == 1
        return {repo.raw_hex(r.id): r for r in rows}

    if not segments:  # nothing to rank; the state is still checked (a segment may be new)
        return None if live_of([]) is None else ([], wrote_audit)
    filtered = (request.user_id is not None or request.memory_type is not None
                or bool(request.tags))
    # A pointer in several segments counts once, at its newest version (cached per set).
    masks, keywords = cache.view(segments)
    live: dict[str, Any] | None = None
    if filtered:  # filters first: ranking only what passes them (one query)
        live = live_of(None)
        if live is None:
            return None
        allowed = {repo.raw_uuid(r.id) for r in live.values()}
        masks = [m & np.fromiter((pid in allowed for pid in seg.ids), dtype=bool,
                                 count=len(seg))
                 for seg, m in zip(segments, masks, strict=True)]
    nonzero = sparse_dimensions(query)
    full = keywords.full if not filtered else [False] * len(segments)
    vec_all = _joined([seg.scores(query, nonzero) if whole
                       else np.where(m, seg.scores(query, nonzero), -np.inf)
                       for seg, m, whole in zip(segments, masks, full, strict=True)])
    kw_all = _joined(bm25(segments, masks, request.query, None if filtered else keywords))
    pool = max(32, request.limit * _POOL)
    vec_top = _top(vec_all, pool)
    vec_top = vec_top[np.isfinite(vec_all[vec_top])].tolist()
    kw_top = _top(kw_all, pool)
    kw_top = kw_top[kw_all[kw_top] > 0].tolist()
    fused = fuse(vec_top, kw_top)
    candidates = np.fromiter(fused, dtype=np.int64, count=len(fused))
    # Best score first; between equal scores, the better vector score first.
    order = candidates[np.lexsort((-vec_all[candidates],
                               -np.fromiter(fused.values(), dtype=np.float64,
                                            count=len(fused))))].tolist()
    offsets = np.cumsum([0] + [len(seg) for seg in segments]) if len(segments) > 1 else None

    def rows_of(batch: list[int]) -> list[tuple[int, int]]:
        """(segment, row) of each candidate."""
        if offsets is None:
            return [(0, j) for j in batch]
        at = np.asarray(batch, dtype=np.int64)
        seg_of = (np.searchsorted(offsets, at, side="right") - 1).tolist()
        return list(zip(seg_of, (at - offsets[seg_of]).tolist(), strict=True))

    if not order and live is None:  # no candidate; the state is still checked
        return None if live_of([]) is None else ([], wrote_audit)
    hits: list[SearchHit] = []
    start, size = 0, first_check(request.limit)
    while len(hits) < request.limit and start < len(order):
        batch = order[start:start + size]
        start += len(batch)
        places = rows_of(batch)
        ids = [segments[s].ids[i] for s, i in places]
        versions = [int(segments[s].versions[i]) for s, i in places]
        found = live if live is not None else live_of(  # the live filter, one statement
            ids, versions, len(hits), start >= len(order))
        if found is None:
            return None
        for j, (s, i), pid, version in zip(batch, places, ids, versions, strict=True):
            row = found.get(pid.hex)
            if row is None or row.version != version:
                continue
            pointer = repo.LivePointer.of(row, pid)
            hits.append(SearchHit(kind_of(pointer), pid, pointer.scope_type,
                                  pointer.scope_ref, pointer.key, pointer.title,
                                  pointer.memory_type, list(pointer.tags),
                                  round(fused[j], 6), None, segments[s].texts[i], pointer))
            if len(hits) == request.limit:
                break
        size = max(size, 2 * (request.limit - len(hits)))
    return hits, wrote_audit


def fuse(*rankings: Sequence[int]) -> dict[int, float]:
    """Reciprocal rank fusion: each candidate's score is the sum, over the rankings it is in,
    of 1 / (60 + its rank there). The ranks are the rankings' own (the indexed rows', before
    the live filter), so a candidate's score never depends on whether another is live: the
    live filter can check the best candidates first and stop once ``limit`` are found."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, j in enumerate(ranking, 1):
            fused[j] = fused.get(j, 0.0) + 1.0 / (RRF_K + rank)
    return fused


def first_check(limit: int) -> int:
    """How many of the best candidates the live filter checks first: ``limit`` and a margin
    for the few that are not live (deleted or overwritten since their segment was written,
    expired); if too few of them are, the next ones are checked, twice as many as missing."""
    return limit + max(4, limit // 2)


def _with_values(session: Session, runtime: Searching, cache: SearchCache, actor: Actor,
                 hits: list[SearchHit]) -> list[SearchHit]:
    """Each hit with its verified value; a hit whose object fails verification is dropped,
    its pointer marked corrupt and the failure audited (as a read does)."""
    values: dict[uuid.UUID, Any] = {}
    todo = []
    for hit in hits:
        known, value = cache.value(hit.pointer.content_sha256)
        if known:
            values[hit.pointer_id] = value
        else:
            todo.append(hit)
    failed: list[tuple[SearchHit, str | None, str | None]] = []
    if todo:
        opened = cache.pool().map(actor.tenant_id, runtime.plane.bulkheads,
                                  lambda h: _open(runtime, actor, h.pointer), todo)
        for hit, (data, actual, problem) in zip(todo, opened, strict=True):
            if actual is not None and actual == hit.pointer.content_sha256:
                value = json.loads(data)
                values[hit.pointer_id] = value
                cache.keep_value(actual, value, len(data))
            else:
                failed.append((hit, actual, problem))
    if failed:
        begin_write(session)
        for hit, actual, problem in failed:
            if not memories_repo.mark_corrupt(session, hit.pointer_id,
                                              hit.pointer.storage_path, utcnow()):
                continue  # overwritten or deleted since the ranking: simply left out
            what = ("could not be decrypted" if problem is not None else
                    "is missing from the bucket" if actual is None else
                    "does not match its hash")
            audit.record(session, actor, "read", success=False, pointer_id=hit.pointer_id,
                         detail=f"hash_mismatch: object {what} (search result dropped); "
                                f"expected {hit.pointer.content_sha256} actual {actual}")
        session.commit()
    return [SearchHit(**{**h.__dict__, "value": values[h.pointer_id]})
            for h in hits if h.pointer_id in values]


def _open(runtime: Searching, actor: Actor, pointer: Any) -> tuple[bytes, str | None, str | None]:
    with runtime.sessions() as session:
        target = runtime.plane.by_id(session, pointer.storage_config_id)
        try:
            with store.storage_errors(pointer.id):
                blob = target.adapter.get(pointer.storage_path,
                                          sealed_size(pointer.content_size))
        except storage.ObjectNotFound:
            return b"", None, None
        try:
            data = keys.open_object(session, keyring_of(runtime.plane), actor.tenant_id,
                                    pointer.storage_path, pointer.id, blob)
        except DecryptionError as exc:
            return b"", None, str(exc)
        return data, sha256_hex(data), None
