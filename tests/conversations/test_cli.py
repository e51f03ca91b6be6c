"""``memplane conversations add/show/context``: the operator commands on the embedded
default's database and bucket (and on PostgreSQL), through the same services as the API."""

from __future__ import annotations

import json

from tests.cli.test_events_entries import _run, env, wide_tables  # noqa: F401 (fixtures)


def test_add_show_and_context(env: dict[str, str]) -> None:  # noqa: F811
    added = _run(env, "conversations", "add", "c-cli", "user", "hello world",
                 "--user", "u-cli", "--model", "gpt-4")
    assert added.exit_code == 0, added.output
    reply = _run(env, "conversations", "add", "c-cli", "assistant", "-", stdin="Hi there!")
    assert reply.exit_code == 0, reply.output
    shown = _run(env, "conversations", "show", "c-cli", "--messages")
    assert shown.exit_code == 0, shown.output
    window = _run(env, "conversations", "context", "c-cli", "--message", "and now?",
                  "--budget", "100", "--system", "Be brief.", "--scope", "user:u-cli")
    assert window.exit_code == 0, window.output
    bad_scope = _run(env, "conversations", "context", "c-cli", "--message", "x",
                     "--budget", "100", "--scope", "user")
    missing = _run(env, "conversations", "show", "c-none")

    first = json.loads(added.stdout)
    assert (first["seq"], first["tokens"], first["user_id"]) == (1, 6, "u-cli")
    assert first["conversation"]["encoding"] == "cl100k_base"
    state, *messages = [json.loads(line) for line in shown.stdout.splitlines()]
    assert (state["message_count"], state["model"]) == (2, "gpt-4")
    assert [(m["role"], m["content"]) for m in messages] == [("user", "hello world"),
                                                              ("assistant", "Hi there!")]
    body = json.loads(window.stdout)
    assert [s["content"] for s in body["sections"]] == ["Be brief.", "hello world",
                                                        "Hi there!", "and now?"]
    assert body["total_tokens"] == sum(s["tokens"] for s in body["sections"])
    assert bad_scope.exit_code == 2
    assert "is not scope:scope_ref" in bad_scope.output
    assert missing.exit_code == 1
    assert "no conversation 'c-none'" in missing.output
