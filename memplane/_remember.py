"""The request ``memory.remember`` sends (``POST /v1/remember``), shared by both clients."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ._base import Call, parse_model
from ._models import Remembered


def remember_call(*, messages: Iterable[Mapping[str, str]], user_id: str,
                  agent_id: str | None, conversation_id: str | None, scope: str | None,
                  scope_ref: str | None, dry_run: bool) -> Call[Remembered]:
    body: dict[str, object] = {
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "user_id": user_id, "dry_run": dry_run}
    optional = {"agent_id": agent_id, "conversation_id": conversation_id, "scope": scope,
                "scope_ref": scope_ref}
    body.update({k: v for k, v in optional.items() if v is not None})
    return Call("POST", "/v1/remember", parse_model(Remembered), json=body)
