"""Who may use the console, and a held subject: an agent key is refused with a sentence; a
subject under legal hold shows the hold and no Erase button; holds are placed and lifted
from the console, audited; the whole sign-in-to-plan path works from the keyboard alone."""

from __future__ import annotations

import uuid
from typing import Any

from playwright.sync_api import expect

from .conftest import Watched, screenshot
from .seeding import seed_subject, sign_in


def test_an_agent_key_is_refused_with_a_sentence(console_page: Watched, tenant: Any) -> None:
    page = console_page.page
    page.goto("/console/")
    page.get_by_label("API key").fill(tenant.key("agent"))
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text(
        "This is an agent key. The compliance console needs a key with role compliance or "
        "admin; agent keys read and write memories but cannot export, erase or read the "
        "audit log.")
    expect(page.get_by_role("navigation", name="Console pages")).to_be_empty()
    expect(page.get_by_label("API key")).to_have_value("")
    page.get_by_label("API key").fill("mp_not_a_key_at_all")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text(
        "That API key is not valid (unknown or revoked); check it and try again.")
    screenshot(page, "0-agent-refused")
    # the refused key's whoami is audited like any other call
    with tenant.stack.http(tenant.admin_key) as http:
        rows = http.get("/v1/audit", params={"operation": "whoami"}).json()["items"]
    assert [row["detail"] for row in rows] == ["key role agent"]
    # the browser's 401 for the made-up key is the one error the page may log
    assert [e for e in console_page.problems() if "401" not in e] == []


def test_a_held_subject_has_no_erase_button(console_page: Watched, tenant: Any) -> None:
    page = console_page.page
    user = f"held-{uuid.uuid4().hex[:8]}"
    seed_subject(tenant, user)
    page.goto("/console/")
    sign_in(page, tenant.key("compliance"))
    page.get_by_role("button", name="Legal holds").click()
    page.get_by_label("User id to hold").fill(user)
    page.get_by_label("Reason").select_option("litigation")
    page.get_by_role("button", name="Place hold").click()
    placed = page.get_by_role("status").filter(has_text="placed on")
    expect(placed).to_contain_text(f"placed on {user} (litigation)")
    hold_id = placed.inner_text().split()[1]

    page.get_by_role("button", name="Subject").click()
    page.get_by_label("User id", exact=True).fill(user)
    page.get_by_role("button", name="Look up").click()
    expect(page.get_by_text(f"Legal hold {hold_id} on this subject (litigation)")).to_be_visible()
    expect(page.get_by_text(f"This subject is under legal hold {hold_id} (litigation)")) \
        .to_be_visible()
    expect(page.get_by_text("No Erase button: the subject is under legal hold.")) \
        .to_be_visible(timeout=60_000)
    expect(page.get_by_role("button", name="Erase", exact=True)).to_have_count(0)
    expect(page.get_by_label("Type the user id to confirm")).to_have_count(0)
    screenshot(page, "9-held-subject")

    page.get_by_role("button", name="Legal holds").click()
    page.get_by_role("button", name=f"Lift hold {hold_id}").click()
    expect(page.get_by_text(f"Hold {hold_id} lifted.")).to_be_visible()
    with tenant.stack.http(tenant.admin_key) as http:
        placed_rows = http.get("/v1/audit", params={"operation": "legal_hold"}).json()["items"]
        lifted_rows = http.get("/v1/audit",
                               params={"operation": "legal_hold_lift"}).json()["items"]
    assert [r["detail"] for r in placed_rows if r["detail"].startswith("hold ")] == [
        f"hold {hold_id} placed on a data subject (litigation)"]
    assert [r["detail"] for r in lifted_rows] == [
        f"hold {hold_id} (litigation) lifted by {placed_rows[-1]['accessor_id']}"]
    assert all(user not in r["detail"] for r in placed_rows + lifted_rows)
    assert console_page.problems() == []


def test_the_keyboard_alone_signs_in_looks_up_and_erases(console_page: Watched,
                                                        tenant: Any) -> None:
    page = console_page.page
    user = f"keys-{uuid.uuid4().hex[:8]}"
    seed_subject(tenant, user)
    page.goto("/console/")
    # the key field has the focus on arrival; Enter submits
    page.keyboard.type(tenant.key("compliance"))
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Subject")).to_be_visible()
    expect(page.get_by_label("User id", exact=True)).to_be_focused()
    page.keyboard.type(user)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name=f"What memplane holds about {user}")).to_be_focused()
    # the dry-run plan comes by itself; then Tab to the confirmation, type, Tab, Enter
    expect(page.get_by_role("table", name="Erasure plan by layer")).to_be_visible(timeout=60_000)
    confirm = page.get_by_label("Type the user id to confirm")
    for _ in range(60):
        if confirm.evaluate("e => e === document.activeElement"):
            break
        page.keyboard.press("Tab")
    expect(confirm).to_be_focused()
    page.keyboard.type(user)
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Erase", exact=True)).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#receipt-verdict")).to_have_text("Receipt verified", timeout=90_000)
    expect(page.locator("#receipt-verdict")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    # the focus ring is drawn (:focus-visible) for keyboard users
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"
    assert console_page.problems() == []


def test_the_policy_refuses_inline_script_in_the_page(console_page: Watched) -> None:
    """The header is in force, not only sent: a script element with inline code that the
    page (or an injected string) adds does not run, and the browser reports the refusal."""
    page = console_page.page
    page.goto("/console/")
    ran = page.evaluate("""() => new Promise(resolve => {
        document.addEventListener('securitypolicyviolation',
                                  e => resolve([window.__inline === 1, e.violatedDirective]));
        const s = document.createElement('script');
        s.textContent = 'window.__inline = 1';
        document.body.append(s);
    })""")
    assert ran == [False, "script-src-elem"]
    assert any("Content Security Policy" in e for e in console_page.console_errors)
