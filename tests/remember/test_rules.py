"""The built-in extractor's rule table on its own: the key of a fact is deterministic and
names its kind and subject, never its value."""

from __future__ import annotations

from control_plane.remember.rules import extract, sentences, slug


def facts(*lines: str) -> list[tuple[str, str | None] | None]:
    found = extract([(n, "user", line) for n, line in enumerate(lines, 1)])
    return [None if f is None else (f.key, f.value) for _, f in found]


def test_a_changed_statement_maps_onto_the_same_key() -> None:
    assert facts("I prefer responses in bullet points.", "Actually, I prefer numbered lists",
                 "I now prefer short answers please") == [
        ("preference.response_format", "bullet points"),
        ("preference.response_format", "numbered lists"),
        ("preference.response_format", "short answers")]
    assert facts("I use Slack for team chat", "I don't use Slack anymore",
                 "I no longer use slack", "I'm not using Slack any more") == [
        ("uses.slack", "Slack for team chat"), ("uses.slack", None), ("uses.slack", None),
        ("uses.slack", None)]


def test_other_phrasings() -> None:
    assert facts("From now on, always reply in Spanish.", "Please answer in bullet points",
                 "I stopped using Jira", "I've been working on Project Atlas",
                 "I'm using Linear now", "I switched to Teams", "I live in Lisbon",
                 "I'm in the data platform team", "I prefer in-person meetings") == [
        ("preference.language", "Spanish"), ("preference.response_format", "bullet points"),
        ("uses.jira", None), ("project.project-atlas", "Project Atlas"),
        ("uses.linear", "Linear"), ("uses.teams", "Teams"), ("location", "Lisbon"),
        ("team", "data platform"), ("preference.meeting", "in-person meetings")]


def test_keys_hold_no_value() -> None:
    assert facts("My phone number is +1 555 010 9999", "Call me Ana",
                 "I work as a nurse", "my employee id is 12345678") == [
        ("about.phone-number", "+1 555 010 9999"), ("name", "Ana"), ("role", "nurse"),
        ("about.employee-id", "12345678")]
    assert slug("Project 2024117 Phoenix") == "project-phoenix"
    assert slug("The Big Migration of Our Main Billing Database") == "big-migration-of-main"


def test_only_first_person_statements_of_the_user() -> None:
    assert facts("Can you use bullet points?", "Do you prefer tea?", "I'm a bit tired",
                 "They use Slack") == [None, None, None, None]
    assert extract([(1, "assistant", "I prefer bullet points.")]) == []
    assert sentences("Hi! I use Jira; I'm working on Apollo.\nThanks") == [
        "Hi", "I use Jira", "I'm working on Apollo", "Thanks"]
