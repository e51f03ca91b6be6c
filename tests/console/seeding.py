"""A data subject's memories, entry and event written through the API, and signing in."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect


def seed_subject(tenant: Any, user: str) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        for key in ("prefs", "notes"):
            http.put(f"/v1/memories/user/{user}/{key}",
                     json={"value": {"about": key}}).raise_for_status()
        http.post("/v1/entries", json={"scope": "user", "scope_ref": user, "title": "t",
                                       "summary": "an entry"}).raise_for_status()
        http.post("/v1/events", json={"scope": "user", "scope_ref": user, "kind": "message",
                                      "body": "hello"}).raise_for_status()


def sign_in(page: Any, key: str) -> None:
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Subject")).to_be_visible()
