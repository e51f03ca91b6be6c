"""The compliance officer's journey through the console in headless Chromium, against a live
server: sign in → look up → export → download → dry run → erase → "Receipt verified" → the
audit shows the erasure; axe-core on each page; no console error, CSP violation or request
to another origin; screenshots in .cache/console-screenshots/."""

from __future__ import annotations

import csv
import io
import json
import uuid
import zipfile
from typing import Any

from playwright.sync_api import expect

from control_plane.console.router import CSP

from .conftest import SCREENSHOTS, Watched, axe_violations, screenshot
from .seeding import seed_subject, sign_in


def check_page(watched: Watched, axe_source: str, name: str) -> None:
    """No serious or critical axe violation, nothing wider than 320 px, a screenshot."""
    page = watched.page
    assert axe_violations(page, axe_source) == [], name
    screenshot(page, name)
    page.set_viewport_size({"width": 320, "height": 800})
    width = page.evaluate("() => document.documentElement.scrollWidth")
    page.set_viewport_size({"width": 1200, "height": 900})
    assert width <= 320, f"{name} is {width} px wide at a 320 px viewport"


def test_officer_exports_erases_and_reads_the_audit(console_page: Watched, stack: Any,
                                                     tenant: Any, axe_source: str) -> None:
    page = console_page.page
    user = f"subject-{uuid.uuid4().hex[:8]}"
    seed_subject(tenant, user)
    response = page.goto("/console/")
    assert response is not None and response.headers["content-security-policy"] == CSP
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    check_page(console_page, axe_source, "1-sign-in")

    sign_in(page, tenant.key("compliance"))
    page.get_by_label("User id", exact=True).fill(user)
    page.get_by_role("button", name="Look up").click()
    layers = page.get_by_role("table", name=f"Holdings of {user} by layer")
    expect(layers).to_contain_text("Memories2")
    expect(layers).to_contain_text("Entries1")
    expect(layers).to_contain_text("Events1")
    expect(page.get_by_text("No legal hold covers this subject.")).to_be_visible()
    check_page(console_page, axe_source, "2-subject")

    page.get_by_role("button", name="Start export").click()
    save = page.get_by_role("button", name="Download archive")
    expect(save).to_be_visible(timeout=60_000)
    with page.expect_download() as download:
        save.click()
    archive = zipfile.ZipFile(io.BytesIO(download.value.path().read_bytes()))
    manifest = json.loads(archive.read("manifest.json"))
    assert (manifest["format"], manifest["user_id"]) == ("memplane-export/1", user)
    assert manifest["counts"]["pointers"] == 3 and manifest["counts"]["events"] == 1
    expect(page.get_by_text("its SHA-256 matches the export job's record")).to_be_visible()
    expect(page.get_by_role("heading", name="Manifest")).to_be_visible()
    expect(page.get_by_text("memplane-export/1")).to_be_visible()
    check_page(console_page, axe_source, "3-export")

    plan = page.get_by_role("table", name="Erasure plan by layer")
    expect(plan).to_contain_text("Pointers (memories and entries)3", timeout=60_000)
    page.get_by_label("Type the user id to confirm").fill(user[:-1])
    page.get_by_role("button", name="Erase", exact=True).click()
    expect(page.get_by_text("does not match the subject")).to_be_visible()
    page.get_by_label("Type the user id to confirm").fill(user)
    page.get_by_role("button", name="Erase", exact=True).click()
    verdict = page.locator("#receipt-verdict")
    expect(verdict).to_have_text("Receipt verified", timeout=90_000)
    expect(page.get_by_text("proven by RFC 9162 inclusion proofs")).to_be_visible()
    expect(page.get_by_text(f"After the erasure, memplane holds 0 items about {user}."))\
        .to_be_visible()
    check_page(console_page, axe_source, "4-erasure")
    page.set_viewport_size({"width": 720, "height": 900})
    top, bottom = page.evaluate("""() => {
        const y = (e, end) => e.getBoundingClientRect()[end] + window.scrollY;
        return [y(document.querySelector('#receipt-verdict').closest('div').parentElement
                  .previousElementSibling.previousElementSibling, 'top'),
                y(document.querySelectorAll('dl.facts')[1], 'bottom')];
    }""")
    page.screenshot(path=str(SCREENSHOTS / "4-receipt-verified.png"), full_page=True,
                    clip={"x": 0, "y": top - 40, "width": 720, "height": bottom - top + 56})
    page.set_viewport_size({"width": 1200, "height": 900})

    page.get_by_role("button", name="Audit").click()
    expect(page.locator("#chain-verdict")).to_have_text("Audit chain verified", timeout=60_000)
    page.get_by_label("Operation").fill("erase")
    page.get_by_role("button", name="Apply filters").click()
    rows = page.get_by_role("table", name="Audit rows", exact=False)
    expect(rows).to_contain_text("erasure completed; receipt")
    with page.expect_download() as download:
        page.get_by_role("button", name="Export CSV").click()
    table = list(csv.DictReader(io.StringIO(download.value.path().read_text())))
    assert table and {row["operation"] for row in table} == {"erase"}
    assert any("erasure completed" in row["detail"] for row in table)
    check_page(console_page, axe_source, "5-audit")

    page.get_by_role("button", name="Legal holds").click()
    expect(page.get_by_role("heading", name="Legal holds")).to_be_visible()
    expect(page.get_by_text("No legal holds.")).to_be_visible()
    check_page(console_page, axe_source, "6-legal-holds")
    page.get_by_role("button", name="Storage").click()
    configs = page.get_by_role("table", name="Bucket configurations, the default first")
    expect(configs).to_contain_text("(default)")
    expect(configs).to_contain_text("checked with an admin key only")
    check_page(console_page, axe_source, "7-storage")

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()
    assert page.evaluate("() => [localStorage.length, sessionStorage.length, document.cookie]") \
        == [0, 0, ""]
    assert console_page.problems() == []


def test_a_tampered_receipt_is_not_verified(console_page: Watched, stack: Any,
                                            tenant: Any) -> None:
    """One byte of the receipt changed on its way to the browser: the page says NOT."""
    page = console_page.page
    user = f"subject-{uuid.uuid4().hex[:8]}"
    seed_subject(tenant, user)

    def tamper(route: Any) -> None:
        body = route.fetch().text()
        at = body.index('"hash":"') + len('"hash":"')
        flipped = "1" if body[at] != "1" else "2"
        route.fulfill(status=200, content_type="application/json",
                      body=body[:at] + flipped + body[at + 1:])

    page.route(lambda url: "/v1/receipts/" in url and not url.endswith("/public-key"), tamper)
    page.goto("/console/")
    sign_in(page, tenant.key("compliance"))
    page.get_by_label("User id", exact=True).fill(user)
    page.get_by_role("button", name="Look up").click()
    page.get_by_label("Type the user id to confirm").fill(user)
    page.get_by_role("button", name="Erase", exact=True).click()
    expect(page.locator("#receipt-verdict")).to_have_text("Receipt NOT verified",
                                                          timeout=90_000)
    expect(page.get_by_text("The Ed25519 signature does not match the receipt")).to_be_visible()
    screenshot(page, "8-receipt-not-verified")
    assert console_page.problems() == []
