"""A small real OpenAI-compatible chat server for the summariser tests.

A ``ThreadingHTTPServer`` on 127.0.0.1 that answers ``POST /v1/chat/completions`` from a
script: each request takes the next scripted :class:`Answer` (then ``default``), and is
recorded (path, headers, JSON body) for the test to check. Answers for the failure cases:
:func:`ok`, :func:`rate_limited` (429 + Retry-After), :func:`server_error` (500),
:func:`stall` (holds the answer until the server stops: longer than any short client timeout),
:func:`trickle` (the answer one byte at a time),
:func:`not_json`, :func:`no_choices`, :func:`empty_content`, and any status.
Remote error bodies carry :data:`REMOTE_SECRET` so tests can prove it is never repeated.

It also answers ``POST /v1/embeddings`` (the embedder tests): :func:`embeddings` answers
every text of the request with a deterministic unit vector of ``dim`` numbers (the same text
always gets the same vector); the failure answers above apply as well.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.quiet_server import QuietHTTPServer

REMOTE_SECRET = "remote-detail-7f3a: internal stack trace and account 4242"


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    stall: bool = False
    trickle: bool = False  # send the body one byte every 50 ms
    embed_dim: int | None = None  # answer the request's texts with vectors of this length


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    json: Any


def completion(text: str, total_tokens: int | None = 42, model: str = "fake-model") -> bytes:
    answer: dict[str, Any] = {
        "id": "chatcmpl-1", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}]}
    if total_tokens is not None:
        answer["usage"] = {"prompt_tokens": total_tokens - 2, "completion_tokens": 2,
                           "total_tokens": total_tokens}
    return json.dumps(answer).encode()


def ok(text: str = "- Decided to move budget to Meta.", total_tokens: int | None = 42
       ) -> Answer:
    return Answer(200, completion(text, total_tokens), {"Content-Type": "application/json"})


def error(status: int, headers: dict[str, str] | None = None) -> Answer:
    body = json.dumps({"error": {"message": REMOTE_SECRET}}).encode()
    return Answer(status, body, {"Content-Type": "application/json", **(headers or {})})


def rate_limited(retry_after: str | None = "7") -> Answer:
    return error(429, {"Retry-After": retry_after} if retry_after is not None else {})


def server_error() -> Answer:
    return error(500)


def stall() -> Answer:
    return Answer(stall=True)


def trickle(text: str = "- slow") -> Answer:
    return Answer(200, completion(text), {"Content-Type": "application/json"}, trickle=True)


def not_json() -> Answer:
    return Answer(200, f"<html>{REMOTE_SECRET}</html>".encode(), {"Content-Type": "text/html"})


def no_choices() -> Answer:
    return Answer(200, json.dumps({"object": "chat.completion", "choices": [],
                                   "note": REMOTE_SECRET}).encode())


def empty_content() -> Answer:
    return Answer(200, completion("   "))


def vector_for(text: str, dim: int) -> list[float]:
    """The fake endpoint's vector for ``text``: deterministic, unit length."""
    import hashlib
    import math

    raw = [b - 127.5 for b in hashlib.shake_256(text.encode()).digest(dim)]
    norm = math.sqrt(sum(x * x for x in raw))
    return [x / norm for x in raw]


def embeddings(dim: int = 8) -> Answer:
    return Answer(200, b"", {"Content-Type": "application/json"}, embed_dim=dim)


def embedding_list(vectors: list[Any]) -> Answer:
    """An embeddings answer with exactly these ``embedding`` values (malformed cases)."""
    body = {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": v}
                                       for i, v in enumerate(vectors)], "note": REMOTE_SECRET}
    return Answer(200, json.dumps(body).encode(), {"Content-Type": "application/json"})


class FakeLLM:
    """The server; use as a context manager. ``base_url`` ends in ``/v1``."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.script: deque[Answer] = deque()
        self.default = ok()
        self.seen: list[Seen] = []
        self._release = threading.Event()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with fake._lock:
                    fake.seen.append(Seen("POST", self.path, dict(self.headers), body))
                    answer = fake.script.popleft() if fake.script else fake.default
                if self.path not in ("/v1/chat/completions", "/v1/embeddings"):
                    answer = error(404)
                if answer.embed_dim is not None:
                    texts = body.get("input") if isinstance(body, dict) else None
                    texts = [texts] if isinstance(texts, str) else texts or []
                    answer = Answer(200, json.dumps({
                        "object": "list", "model": "fake-embed",
                        "data": [{"object": "embedding", "index": i,
                                  "embedding": vector_for(str(t), answer.embed_dim)}
                                 for i, t in enumerate(texts)],
                        "usage": {"prompt_tokens": 3, "total_tokens": 3}}).encode(),
                        answer.headers)
                if answer.stall:
                    # Hold the answer until the server stops; the client gives up first.
                    fake._release.wait(timeout=60)
                    self.close_connection = True
                    return
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                if not answer.trickle:
                    self.wfile.write(answer.body)
                    return
                try:
                    for i in range(len(answer.body)):
                        self.wfile.write(answer.body[i:i + 1])
                        self.wfile.flush()
                        fake._release.wait(timeout=0.05)  # the pace of a hostile endpoint
                except OSError:
                    self.close_connection = True  # the client hung up

            do_GET = do_PUT = do_POST

        self.server = QuietHTTPServer((host, 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)

    def answer(self, *answers: Answer) -> FakeLLM:
        with self._lock:
            self.script.extend(answers)
        return self

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> FakeLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
