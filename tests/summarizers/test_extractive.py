"""The offline extractive summariser: exact output on crafted input (issue 11, point 5)."""

from __future__ import annotations

import random
import re
import uuid
from datetime import UTC, datetime

import pytest

from control_plane.summarizers import EventText, Summarizer, TokenBudget
from control_plane.summarizers.extractive import _CUES, ExtractiveSummarizer, score, units

CALL = """# Weekly call with Acme

Met with the team at the usual time. The weather was nice
and everyone was in a good mood.

- **Decided** to move 20% of the budget to [Meta](https://meta.com).
- Sarah will send the Q3 report by Friday.
* [x] nothing here

```
deploy --replicas 3 # we will never see this
```
> Jordan from Acme rejected the proposal.

---
| Channel | Spend |
|---|---|
"""


def event(day: int, body: str, kind: str = "call_summary") -> EventText:
    return EventText(uuid.UUID(int=day), kind, datetime(2025, 1, day, 9, 30, tzinfo=UTC), body)


def test_markdown_becomes_one_unit_per_heading_bullet_and_paragraph() -> None:
    assert list(units(CALL)) == [
        "Weekly call with Acme",
        "Met with the team at the usual time. The weather was nice and everyone was in a "
        "good mood.",
        "Decided to move 20% of the budget to Meta.",
        "Sarah will send the Q3 report by Friday.",
        "nothing here",
        "Jordan from Acme rejected the proposal.",
        "Channel Spend",
    ]


@pytest.mark.parametrize(("sentence", "points"), [
    ("The weather was nice.", 0),
    ("Weekly call with Acme", 1),                      # one name
    ("We met Jordan and Priya from Acme.", 2),         # names count at most twice
    ("Acme renewed.", 3),                              # first word is no name; a cue
    ("Revenue was 40 thousand.", 2),                   # a number
    ("Spend rose to $40k, up 12%.", 3),                # a number that is money
    ("See you on 2025-03-14.", 3),                     # a number and a date
    ("We agreed to cut spend by 10% in Q3 with Meta.", 8),  # cue, money, date, name
    ("I think so.", 0),                                # "I" is no name
    # Each kind of money and date on its own, and near misses ("dec" in "decided", a
    # number glued to a word, a date inside a longer token).
    ("Paid €3 upfront.", 3),
    ("It costs 5 usd each.", 3),
    ("Budget of 2bn.", 6),
    ("Costs 1.5 k each.", 3),
    ("meet on march 3.", 3),
    ("ship 3 boxes by monday.", 3),
    ("done in q4 2025.", 3),
    ("version 2k2 shipped.", 2),
    ("agent a5k is fine.", 2),
    ("decided on 3 options.", 5),
    ("room 12-2025-03-14x.", 2),
])
def test_scores(sentence: str, points: int) -> None:
    assert score(sentence) == points


def test_keeps_decisions_commitments_numbers_and_names_in_order() -> None:
    summary = ExtractiveSummarizer().summarize("entity", "ent_acme", [
        event(5, CALL),
        event(12, "Small talk about holidays. Budget for Q2 is 50k EUR. Nice lunch.",
              "campaign_change"),
    ])
    assert summary.text == (
        "- 2025-01-05 (call_summary): Decided to move 20% of the budget to Meta.\n"
        "- 2025-01-05 (call_summary): Sarah will send the Q3 report by Friday.\n"
        "- 2025-01-05 (call_summary): Jordan from Acme rejected the proposal.\n"
        "- 2025-01-12 (campaign_change): Budget for Q2 is 50k EUR.")
    assert (summary.provider, summary.model, summary.prompt_version, summary.tokens_used) == (
        "memplane", "extractive-v1", "extract-v1", 0)


def test_a_sentence_repeated_across_events_is_kept_once() -> None:
    summary = ExtractiveSummarizer().summarize("project", "p1", [
        event(1, "We agreed to launch on March 3. Weather chat."),
        event(2, "Recap: we agreed to launch on March 3!\n\nPriya will own the launch."),
        event(3, "- We AGREED to launch on March 3"),
    ])
    assert summary.text == (
        "- 2025-01-01 (call_summary): We agreed to launch on March 3.\n"
        "- 2025-01-02 (call_summary): Recap: we agreed to launch on March 3!\n"
        "- 2025-01-02 (call_summary): Priya will own the launch.")


def test_nothing_scoring_keeps_each_events_first_sentence() -> None:
    summary = ExtractiveSummarizer().summarize("team", "t1", [
        event(1, "Quiet week. Nothing happened."),
        event(2, "quiet week"),
        event(3, "Lunch was good. Coffee too."),
    ])
    assert summary.text == ("- 2025-01-01 (call_summary): Quiet week.\n"
                            "- 2025-01-03 (call_summary): Lunch was good.")


def test_output_is_bounded_keeping_the_best_most_recent_in_order() -> None:
    events = [event(day, f"Note {day} from the call. We agreed on step {day}.")
              for day in range(1, 11)]
    events[3] = event(4, "We agreed to pay $9,000 on 2025-02-01 with Acme and Meta.")
    summary = ExtractiveSummarizer(max_sentences=3).summarize("entity", "e", events)
    # "Note N from the call." scores 2 (a number); "We agreed on step N." scores 5; the
    # payment sentence scores 3+3+1+2 = 9. The best three, most recent on a tie, in order.
    assert summary.text == (
        "- 2025-01-04 (call_summary): We agreed to pay $9,000 on 2025-02-01 with Acme and "
        "Meta.\n"
        "- 2025-01-09 (call_summary): We agreed on step 9.\n"
        "- 2025-01-10 (call_summary): We agreed on step 10.")
    long = ExtractiveSummarizer(max_chars=150).summarize("entity", "e", events)
    assert len(long.text) <= 150
    assert long.text == (
        "- 2025-01-04 (call_summary): We agreed to pay $9,000 on 2025-02-01 with Acme and "
        "Meta.\n"
        "- 2025-01-10 (call_summary): We agreed on step 10.")


def test_a_very_long_sentence_is_cut() -> None:
    summary = ExtractiveSummarizer().summarize("entity", "e", [
        event(1, "We decided " + "very " * 200 + "much.")])
    line = summary.text
    assert len(line) == len("- 2025-01-01 (call_summary): ") + 500
    assert line.endswith("…")


def test_deterministic_and_satisfies_the_protocol() -> None:
    summarizer = ExtractiveSummarizer()
    assert isinstance(summarizer, Summarizer)
    events = [event(1, CALL), event(2, "Acme will renew in Q4.")]
    assert summarizer.summarize("entity", "a", events) == summarizer.summarize(
        "entity", "a", list(events))


def test_token_budget_counts_and_refuses_before_spending() -> None:
    from control_plane.summarizers import BudgetSpent

    budget = TokenBudget(1000)
    budget.ensure(1000)
    budget.charge(600)
    assert (budget.spent, budget.remaining) == (600, 400)
    with pytest.raises(BudgetSpent) as spent:
        budget.ensure(401)
    assert (spent.value.needed, spent.value.remaining) == (401, 400)
    budget.narrow(500)
    assert budget.remaining == 0
    unlimited = TokenBudget()
    unlimited.ensure(10**9)
    assert unlimited.remaining is None


# The cue words as one flat list of alternatives, as they were first written: the tree in
# ``_CUES`` must find a cue in exactly the same strings.
_FLAT_CUES = re.compile(
    r"\b(?:decid\w*|decision\w*|agree[ds]?|agreement|will|won't|shall|must|commit\w*|"
    r"approv\w*|reject\w*|signed|sign-off|chose|chosen|plan|plans|planned|deadline\w*|"
    r"owner\w*|next steps?|action items?|launch\w*|cancel\w*|renew\w*|churn\w*|escalat\w*|"
    r"prioriti[sz]\w*|switch\w*|hire[ds]?|budget\w*)\b")
_PIECES = ("decid", "decision", "agree", "agreed", "agreement", "will", "won't", "won", "shall",
           "must", "commit", "approv", "reject", "signed", "sign-off", "sign", "chose",
           "chosen", "plan", "plans", "planned", "planning", "deadline", "owner", "next step",
           "next steps", "next", "step", "action item", "action items", "launch", "cancel",
           "renew", "churn", "escalat", "prioritis", "prioritiz", "priorit", "switch", "hire",
           "hires", "hired", "hirer", "budget", "a", "s", "d", "ed", "ing", "é", "ß", "_", "1",
           "x", "'", "-", " ", "  ", ".", ",", "ä", "ς", "İ")


def test_the_cue_tree_finds_what_the_flat_list_finds() -> None:
    rng = random.Random(20251201)
    for _ in range(50_000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 8))).lower()
        assert (_CUES.search(text) is None) == (_FLAT_CUES.search(text) is None), text
    for cue in _PIECES:
        assert (_CUES.search(cue) is None) == (_FLAT_CUES.search(cue) is None), cue
