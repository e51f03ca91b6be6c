"""A SCRIPTED stand-in for a model endpoint — not a model. An OpenAI-compatible chat server
on 127.0.0.1 that answers remember's extraction prompt (``control_plane.remember.model``)
from the memory-quality dataset's expected facts: every user message it recognises as a
dataset statement becomes the decision a good model would return (ADD or UPDATE the fact's
key with its expected value, DELETE a retracted key). It is also *careless* on purpose: a
sensitive statement that reaches it as said comes back as a fact holding the secret (a card
number, an SSN, a password), as a model that ignores its instructions would answer — the
server must refuse to store it. ``secrets_seen`` records every secret a prompt showed it
(the server redacts detected values first, so it should stay empty). Any other prompt (the
endpoint probe) gets ``{"decisions": []}``.

It measures the server's side of the model path (parsing, reconciliation, the sensitive
screen, context) with a perfect extractor, never a real model's quality.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .memory_quality_data import (
    USERS,
    Change,
    Fact,
    Retract,
    Said,
    Sensitive,
    User,
    statements,
)

MODEL = "scripted-extractor"
# The dataset's kinds of fact as the extraction prompt's key kinds.
_KINDS = {"preference": "preference", "device": "uses", "issue": "issue",
          "project": "project", "role": "about"}
_MESSAGE = re.compile(r"^\[(\d+)\] (\w+): (.*)$")
_STORED = re.compile(r"^- (\S+) = ")


def model_keys(user: User) -> dict[str, str]:
    """The dataset key → the key the scripted model answers with (``<kind>.<slug>``)."""
    keys = {}
    for session in user.sessions:
        for said in session:
            if isinstance(said, Fact):
                keys[said.key] = f"{_KINDS[said.kind]}.{said.key.replace('_', '-')}"
    return keys


def _script(users: list[User]) -> dict[str, tuple[Said, str]]:
    """Each statement's text → (the statement, its model key)."""
    found: dict[str, tuple[Said, str]] = {}
    for user in users:
        keys = model_keys(user)
        for session in user.sessions:
            for said in session:
                key = (f"about.{said.kind}" if isinstance(said, Sensitive)
                       else keys[said.key])
                found[said.said] = (said, key)
    return found


def answer(prompt: str, script: dict[str, tuple[Said, str]]) -> dict[str, Any]:
    """The decisions for one extraction prompt."""
    stored: set[str] = set()
    decisions = []
    section = ""
    for line in prompt.splitlines():
        if line in ("Stored memories:", "New messages:"):
            section = line
            continue
        if section == "Stored memories:" and (hit := _STORED.match(line)):
            stored.add(hit.group(1))
        elif section == "New messages:" and (message := _MESSAGE.match(line)):
            seq, role, content = message.groups()
            if role != "user" or content not in script:
                continue
            said, key = script[content]
            if isinstance(said, Retract):
                if key in stored:
                    decisions.append({"event": "DELETE", "key": key, "seqs": [int(seq)],
                                      "reason": "scripted: retracted"})
                    stored.discard(key)
                continue
            value = said.secret if isinstance(said, Sensitive) else said.expect
            assert isinstance(said, Fact | Change | Sensitive)
            decisions.append({"event": "UPDATE" if key in stored else "ADD", "key": key,
                              "value": value, "seqs": [int(seq)], "reason": "scripted"})
            stored.add(key)
    return {"decisions": decisions}


class ScriptedModel:
    """The server; a context manager. ``base_url`` ends in ``/v1``; ``calls`` counts the
    extraction prompts it answered."""

    def __init__(self, users: list[User] | None = None) -> None:
        script = _script(users or USERS)
        secrets = [s.secret for s in statements(users or USERS) if isinstance(s, Sensitive)]
        self.calls = 0
        self.secrets_seen: set[str] = set()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", [])
                                   if m.get("role") == "user")
                if "New messages:" in prompt:
                    owner.calls += 1
                squeezed = re.sub(r"[\s\-]", "", prompt)
                owner.secrets_seen.update(s for s in secrets if s in squeezed)
                text = json.dumps(answer(prompt, script))
                reply = json.dumps({
                    "id": "scripted-1", "object": "chat.completion", "model": MODEL,
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": len(prompt) // 4,
                              "completion_tokens": len(text) // 4,
                              "total_tokens": (len(prompt) + len(text)) // 4}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
