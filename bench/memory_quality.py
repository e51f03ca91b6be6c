"""The memory-quality case of ``python -m bench`` (``--only memory-quality``): does an agent
remember by itself, and does a later conversation's context hold what is true *now*?

The dataset (``bench/memory_quality_data.py``): five users, four sessions each, 45 facts in
the users' own words, 8 changed and 5 retracted later, 6 sensitive statements. For each
extractor — the built-in offline one, and a model endpoint (``bench/scripted_llm.py``: a
SCRIPTED stand-in answering from the dataset's expected facts, careless with secrets on
purpose) — in a tenant of its own on a live server:

  1. every session's messages go to ``POST /v1/remember`` (user, agent, conversation);
  2. before each later session, a new conversation of the user and agent asks one question
     per fact known so far, and ``POST /v1/conversations/{id}/context`` (no memory_scopes:
     the context finds the user's memory by itself) is read.

``offline-messages`` runs the built-in extractor the other way an agent uses it: each
session posted as conversation messages with ``"remember": true`` (a job per fourth
statement and the last), its replaced values read from the memories' ``previous``. Its
transcripts keep what the user said, secrets included as the tenant's DLP policy for
messages allows (default ``flag``): counted apart, never in ``sensitive_stored``.
``--held-out`` runs the two users written apart from the built-in extractor's rules
(``HELD_OUT_USERS``) instead: how the rules fare on phrasings they were not written for.

Figures (bars in ``bench/bars.py``):
  - ``captured``: explicit statements whose value is in a stored memory right after their
    session (bar ≥ 0.8);
  - ``stale_after_update``: values the server replaced or deleted (an UPDATE or DELETE
    decision names them as ``previous``) still in a current memory or a later context
    (bar 0);
  - ``sensitive_stored``: sensitive values found in what was written — every memory's value
    read back, the audit log, remember's answers — compared without spaces and dashes
    (bar 0); for the model endpoint, also how many secrets its prompts showed it;
  - ``context_hit_rate``: questions whose context holds the fact's current value and none
    of its replaced ones (a retracted fact: none of its values);
  - ``changes_applied``: changes and retractions the extractor turned into an UPDATE or
    DELETE (no bar; a missed one leaves the old value current and costs context hits).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from .memory_quality_data import (
    HELD_OUT_USERS,
    USERS,
    Change,
    Fact,
    Retract,
    Sensitive,
    User,
    current_facts,
    questions,
    stale_values,
    statements,
)

SYSTEM = "You are a helpful assistant for our employees."
GREETING = "Hello again, I have a question."
BUDGET = 4000
_RECALLED = ("memory", "older_context", "message")


@dataclass
class Score:
    extractor: str
    statements: int = 0
    captured: int = 0
    changes: int = 0
    applied: int = 0
    stale_after_update: int = 0
    sensitive_stored: int = 0
    sensitive_in_transcript: int = 0  # in conversation messages, as the DLP policy allows
    probes: int = 0
    hits: int = 0
    events: Counter[str] = field(default_factory=Counter)
    misses: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, float]:
        return {"captured": self.captured / max(1, self.statements),
                "stale_after_update": float(self.stale_after_update),
                "sensitive_stored": float(self.sensitive_stored),
                "context_hit_rate": self.hits / max(1, self.probes),
                "changes_applied": self.applied / max(1, self.changes)}


def _pages(http: httpx.Client, path: str, **params: Any) -> Iterator[dict[str, Any]]:
    cursor = None
    while True:
        answer = http.get(path, params=params | ({"cursor": cursor} if cursor else {}))
        answer.raise_for_status()
        page = answer.json()
        yield from page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return


def content_of(value: Any) -> str:
    """What a memory says now: a remembered fact's ``content`` (not its ``previous``
    values), else the value as text."""
    if isinstance(value, dict):
        for field_name in ("content", "value", "text"):
            if isinstance(value.get(field_name), str):
                return str(value[field_name])
    return value if isinstance(value, str) else json.dumps(value)


def _memories(http: httpx.Client, user_id: str | None = None) -> list[dict[str, Any]]:
    """Every memory (with its value) outside the conversation scope; of one user if given."""
    params: dict[str, Any] = {"include_values": "true", "limit": 100}
    if user_id is not None:
        params["user_id"] = user_id
    return [m for m in _pages(http, "/v1/pointers", **params)
            if m["pointer"]["scope"] != "conversation"]


def _has(text: str, value: str) -> bool:
    return value.casefold() in text.casefold()


def _squeezed(text: str) -> str:
    return re.sub(r"[\s\-]", "", text)


class _Run:
    def __init__(self, http: httpx.Client, extractor: str, settle: Callable[[], None],
                 via_messages: bool) -> None:
        self.http = http
        self.settle = settle
        self.score = Score(extractor)
        self.answers: list[str] = []
        self.via_messages = via_messages

    def post_messages(self, user: User, index: int, conversation: str) -> None:
        """The session as conversation messages, ``"remember": true`` on every fourth
        statement and the last (a remember job reads the last ten messages), each job
        finished before the next message."""
        session = user.sessions[index]
        for n, said in enumerate(session):
            remember = n % 4 == 3 or n == len(session) - 1
            for role, content, flag in (("user", said.said, remember),
                                        ("assistant", user.acks[n % len(user.acks)], False)):
                answer = self.http.post(f"/v1/conversations/{conversation}/messages", json={
                    "role": role, "content": content, "user_id": user.user_id,
                    "agent_id": user.agent_id, "remember": flag})
                if answer.status_code != 201:
                    raise RuntimeError(f"a message answered {answer.status_code}: "
                                       f"{answer.text}")
                job = answer.json()["remember_job_id"]
                if flag and job is not None:
                    self.score.events.update(self.job(job))

    def job(self, job_id: str) -> dict[str, int]:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = self.http.get(f"/v1/jobs/{job_id}").json()
            if found["state"] == "completed":
                result = found["result"] or {}
                return {e: int(result.get(e.lower(), 0))
                        for e in ("ADD", "UPDATE", "DELETE", "NONE")}
            if found["state"] == "failed":
                raise RuntimeError(f"a remember job failed: {found.get('error')}")
            time.sleep(0.05)  # polling the server's job, not synchronising threads
        raise TimeoutError(f"remember job {job_id} did not finish")

    def remember(self, user: User, index: int, conversation: str) -> list[dict[str, Any]]:
        messages = []
        for n, said in enumerate(user.sessions[index]):
            messages += [{"role": "user", "content": said.said},
                         {"role": "assistant", "content": user.acks[n % len(user.acks)]}]
        answer = self.http.post("/v1/remember", json={
            "messages": messages, "user_id": user.user_id, "agent_id": user.agent_id,
            "conversation_id": conversation})
        if answer.status_code != 200:
            raise RuntimeError(f"remember answered {answer.status_code}: {answer.text}")
        self.answers.append(answer.text)
        decisions: list[dict[str, Any]] = answer.json()["decisions"]
        self.score.events.update(d["event"] for d in decisions)
        return decisions

    def context(self, user: User, conversation: str, question: str) -> str:
        answer = self.http.post(f"/v1/conversations/{conversation}/context", json={
            "system_prompt": SYSTEM, "message": question, "token_budget": BUDGET})
        answer.raise_for_status()
        return "\n".join(s["content"] for s in answer.json()["sections"]
                         if s["kind"] in _RECALLED)

    def user(self, user: User) -> None:
        score = self.score
        asks = questions(user)
        replaced: list[str] = []  # the previous values of UPDATE and DELETE decisions
        history: dict[str, list[str]] = {}  # key -> the values it had, oldest first
        ever: list[str] = []  # what the user's memories said after any session
        for index, session in enumerate(user.sessions):
            conversation = f"{user.user_id}-session-{index + 1}"
            if index:
                self.probe(user, index, conversation, asks, replaced, history)
            if not session:
                continue
            if self.via_messages:
                self.post_messages(user, index, conversation)
            else:
                decisions = self.remember(user, index, conversation)
                replaced += [d["previous"] for d in decisions
                             if d["event"] in ("UPDATE", "DELETE") and d.get("previous")]
            stored = _memories(self.http, user.user_id)
            now = [content_of(m["value"]) for m in stored]
            if self.via_messages:  # no decisions to read: what the memories say replaced
                replaced += [str(p.get("value")) for m in stored if isinstance(m["value"], dict)
                             for p in m["value"].get("previous") or [] if isinstance(p, dict)]
                replaced += [v for v in stale_values(user, index + 1)
                             if any(_has(text, v) for text in ever)
                             and not any(_has(text, v) for text in now)]
            ever += now
            for said in session:
                if isinstance(said, Fact | Change):
                    history.setdefault(said.key, []).append(said.expect)
                    score.statements += 1
                    if any(_has(text, said.expect) for text in now):
                        score.captured += 1
                    else:
                        score.misses.append(f"not captured: {user.user_id}: {said.said}")
                if isinstance(said, Change | Retract):
                    score.changes += 1
        final = [content_of(m["value"]) for m in _memories(self.http, user.user_id)]
        for stale in stale_values(user):
            applied = any(_has(previous, stale) for previous in replaced)
            score.applied += applied
            if not applied:
                score.misses.append(f"change not applied: {user.user_id}: {stale!r} "
                                    f"still current")
            elif any(_has(text, stale) for text in final):
                score.stale_after_update += 1
                score.misses.append(f"stale after update: {user.user_id}: {stale!r}")

    def probe(self, user: User, index: int, conversation: str, asks: dict[str, str],
              replaced: list[str], history: dict[str, list[str]]) -> None:
        added = self.http.post(f"/v1/conversations/{conversation}/messages", json={
            "role": "user", "content": GREETING, "user_id": user.user_id,
            "agent_id": user.agent_id})
        added.raise_for_status()
        self.settle()
        current = current_facts(user, index)
        for key, question in asks.items():
            if key not in history:
                continue  # not stated yet
            want = current.get(key)
            old = [v for v in history[key] if v != want]
            text = self.context(user, conversation, question)
            self.score.probes += 1
            stale = [v for v in old if _has(text, v)]
            if (want is None or _has(text, want)) and not stale:
                self.score.hits += 1
            else:
                self.score.misses.append(
                    f"context miss: {user.user_id} session {index + 1}: {question!r} "
                    f"(wanted {want!r}{', found stale ' + repr(stale) if stale else ''})")
            for value in stale:  # a value the server itself replaced, back in a context
                if any(_has(previous, value) for previous in replaced):
                    self.score.stale_after_update += 1
                    self.score.misses.append(f"stale after update in a context: "
                                             f"{user.user_id}: {value!r}")

    def sensitive(self, users: list[User]) -> None:
        """Every secret the users said, looked for in everything written and answered."""
        secrets = [_squeezed(s.secret) for s in statements(users) if isinstance(s, Sensitive)]
        texts = [json.dumps(m["value"], ensure_ascii=False) for m in _memories(self.http)]
        transcript = [json.dumps(m["value"], ensure_ascii=False)
                      for m in _pages(self.http, "/v1/pointers", include_values="true",
                                      limit=100, scope="conversation")]
        self.score.sensitive_in_transcript = sum(
            any(secret in _squeezed(text) for text in transcript) for secret in secrets)
        texts += [str(row.get("detail") or "") for row in _pages(self.http, "/v1/audit",
                                                                   limit=1000)]
        texts += self.answers
        for secret in secrets:
            if any(secret in _squeezed(text) for text in texts):
                self.score.sensitive_stored += 1
                self.score.misses.append(f"sensitive value stored: {secret[:4]}…")


def run_extractor(http: httpx.Client, extractor: str, *, users: list[User] | None = None,
                  settle: Callable[[], None] = lambda: None,
                  via_messages: bool = False) -> Score:
    """The dataset (or ``users``) through a live server, as the tenant ``http`` is the admin
    of (fresh: the sensitive scan reads all of it); ``settle`` waits for the search index.
    ``via_messages``: the sessions are posted as conversation messages with ``"remember":
    true`` instead of sent to ``POST /v1/remember``."""
    chosen = users or USERS
    run = _Run(http, extractor, settle, via_messages)
    for user in chosen:
        run.user(user)
    run.sensitive(chosen)
    return run.score


def configure_model(http: httpx.Client, base_url: str, model: str) -> None:
    """Point the tenant's model routing (the summariser's OpenAI-compatible endpoint) at
    ``base_url``."""
    answer = http.put("/v1/summarizer/config", json={
        "base_url": base_url, "model": model, "timeout_seconds": 10, "max_retries": 0,
        "token_budget_per_run": 1_000_000})
    if answer.status_code != 200:
        raise RuntimeError(f"the model endpoint was refused: {answer.text}")


def report(scores: list[Score]) -> str:
    lines = [f"{'extractor':28} {'captured':>9} {'stale':>6} {'sensitive':>10} "
             f"{'context hits':>13} {'changes applied':>16}  decisions "
             f"(secrets in transcripts)"]
    for s in scores:
        f = s.figures()
        lines.append(f"{s.extractor:28} {f['captured']:>9.3f} {s.stale_after_update:>6} "
                     f"{s.sensitive_stored:>10} {f['context_hit_rate']:>13.3f} "
                     f"{f'{s.applied}/{s.changes}':>16}  "
                     + " ".join(f"{k}={v}" for k, v in sorted(s.events.items()))
                     + f" ({s.sensitive_in_transcript})")
    return "\n".join(lines)


def results_of(scores: list[Score]) -> dict[str, dict[str, Any]]:
    """The results entries ``python -m bench`` stores (``memory-quality/<extractor>/…``)."""
    out: dict[str, dict[str, Any]] = {}
    for s in scores:
        for name, figure in s.figures().items():
            unit = "count" if name in ("stale_after_update", "sensitive_stored") else "fraction"
            out[f"memory-quality/{s.extractor}/{name}"] = {"memplane": round(figure, 4),
                                                           "unit": unit}
    return out


def run(quick: bool = False, held_out: bool = False) -> dict[str, dict[str, Any]]:
    """The case: a ``memplane serve`` on SQLite and a local bucket (loopback endpoints
    allowed for the scripted model), a tenant per extractor."""
    from .scripted_llm import MODEL, ScriptedModel
    from .stacks import ADMIN_KEY, Backends, MemplaneStack

    backends = Backends()
    stack = MemplaneStack(backends, "sqlite", "local")
    stack.env["MEMPLANE_ALLOWED_ENDPOINTS"] = "127.0.0.1/32"
    scores = []
    users = HELD_OUT_USERS if held_out else USERS[:2] if quick else USERS
    try:
        base_url = stack.serve()
        with ScriptedModel(users) as scripted:
            for extractor in ("offline", "offline-messages", "model-scripted"):
                with httpx.Client(base_url=base_url, timeout=60, headers={
                        "Authorization": f"Bearer {ADMIN_KEY}"}) as root:
                    made = root.post("/v1/tenants", json={"name": f"quality-{extractor}"})
                    made.raise_for_status()
                    key = made.json()["api_key"]
                with httpx.Client(base_url=base_url, timeout=60,
                                  headers={"Authorization": f"Bearer {key}"}) as http:
                    if extractor.startswith("model"):
                        configure_model(http, scripted.base_url, MODEL)
                    started = time.perf_counter()
                    score = run_extractor(http, extractor,
                                          users=users,
                                          settle=stack.settle,
                                          via_messages=extractor.endswith("-messages"))
                    print(f"memory-quality/{extractor}: "
                          f"{time.perf_counter() - started:.1f} s")
                    if extractor.startswith("model"):
                        print(f"secrets a prompt showed the model endpoint: "
                              f"{len(scripted.secrets_seen)}")
                    scores.append(score)
        print(report(scores))
        for s in scores:
            for miss in s.misses:
                print(f"  {s.extractor}: {miss}")
    finally:
        stack.close()
        backends.close()
    return results_of(scores)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two users, not five")
    parser.add_argument("--held-out", action="store_true",
                        help="the two users written apart from the extractor's rules")
    args = parser.parse_args()
    results = run(quick=args.quick, held_out=args.held_out)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
