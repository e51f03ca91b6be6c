"""The built-in offline summariser: keeps the sentences that carry decisions, commitments,
numbers and names, in their order, without calling anything.

How a body becomes sentences (Markdown-aware): fenced code blocks, tables' separator rows and
horizontal rules are dropped; heading marks (``#``), quote marks (``>``), bullets (``-``,
``*``, ``+``, ``1.``) and check boxes are stripped, so each heading and each bullet is a unit
of its own, and the wrapped lines of a paragraph are joined into one; links keep their text,
emphasis and code marks go. Each unit is split into sentences after ``.``, ``!`` or ``?``
followed by a space and a capital letter or digit.

How a sentence is scored (all on one pass of a few precompiled patterns):

- **+3 decision or commitment**: a cue word — decided/decision, agreed, will, shall, must,
  committed, approved, rejected, signed, chose, plan(ned), deadline, owner, next step,
  action item, launch, cancel, renew, churn, escalate, prioritise, switch, hire, budget;
- **+2 a number** (any digit), **+1 more** when it is money or a share (``$``, ``€``, ``£``,
  ``%``, ``5k``, ``2m``, ``USD``/``EUR``/``GBP``);
- **+1 a date** (``2025-03-14``, ``March 3``, ``Q3``, a weekday);
- **+1 per name**, at most 2: a capitalised word (or an acronym such as ``ROAS``) that is not
  the sentence's first word (``I`` does not count).

A sentence scoring **2 or more** is kept; a sentence already kept (same words, case and
trailing punctuation aside) is not repeated, whichever event repeats it. When more is kept
than fits (``max_sentences``, ``max_chars`` of output), the highest scores win, the more
recent one on a tie, and the winners are written in their original order. When nothing
scores, the first sentence of each event is kept instead, so a summary is never empty.

Output: one Markdown bullet per sentence, prefixed with its event's date and kind::

    - 2025-01-05 (decision): We agreed to move 20% of the budget to Meta.

It reads each body once, keeps only the kept sentences, and does no I/O: linear in the size
of the bodies.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from . import EventText, Summary

PROVIDER = "memplane"
MODEL = "extractive-v1"
PROMPT_VERSION = "extract-v1"

# The cue words as a tree of their first letters (the same words as the flat list
# ``decid\w*|decision\w*|agree[ds]?|agreement|will|won't|shall|must|commit\w*|approv\w*|
# reject\w*|signed|sign-off|chose|chosen|plan|plans|planned|deadline\w*|owner\w*|
# next steps?|action items?|launch\w*|cancel\w*|renew\w*|churn\w*|escalat\w*|
# prioriti[sz]\w*|switch\w*|hire[ds]?|budget\w*``): at each position the engine tries one
# alternative per first letter instead of each of the 31 words.
_CUES = re.compile(
    r"\b(?:a(?:gree(?:[ds]|ment)?|pprov\w*|ction items?)|budget\w*|"
    r"c(?:hosen?|hurn\w*|ancel\w*|ommit\w*)|d(?:ecid\w*|ecision\w*|eadline\w*)|"
    r"escalat\w*|hire[ds]?|launch\w*|must|next steps?|owner\w*|"
    r"p(?:lan(?:s|ned)?|rioriti[sz]\w*)|re(?:ject\w*|new\w*)|"
    r"s(?:hall|igned|ign-off|witch\w*)|w(?:ill|on't))\b")
_DIGIT = re.compile(r"\d")
# Money or a share, and a date: each alternative is a pattern of its own, run only when a
# cheap test (a character or a short pattern every match contains) says it may match — one
# pattern of alternatives tried each of them at every position of every sentence.
_CURRENCY = re.compile(r"[$€£¥]\s?\d")
_PERCENT = re.compile(r"\d\s?%")
_SCALED = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:k|m|bn)\b")
_SCALED_HINT = re.compile(r"\d\s?(?:k|m|bn)\b")
_CODE = re.compile(r"\b(?:usd|eur|gbp)\b")
_ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_QUARTER = re.compile(r"\bq[1-4]\b")
_MONTH_DAY = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\b")
_MONTH_HINT = re.compile(r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d")
_WEEKDAY = re.compile(r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b")
_NAME = re.compile(r"\b[A-Z][A-Za-z]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")

_FENCE = re.compile(r"^\s*(?:```|~~~)")
_RULE = re.compile(r"^\s*(?:[-*_]\s*){3,}$|^\s*\|?\s*:?-{3,}")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
_BULLET = re.compile(r"^\s*(?:>\s*)*(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_RULE_STARTS = frozenset("-*_|:")
_BULLET_STARTS = frozenset("-*+>")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKS = re.compile(r"\*\*|__|~~|`|(?<!\w)\*|\*(?!\w)|#+\s*$")

KEEP_AT = 2
MAX_SENTENCE_CHARS = 500


def units(body: str) -> Iterator[str]:
    """The body's headings, bullets and paragraphs, Markdown marks stripped, one line each."""
    paragraph: list[str] = []
    in_code = False
    for raw in body.splitlines():
        stripped = raw.lstrip()
        first = stripped[:1]
        # Each pattern runs only on lines whose first character could start it.
        if first in ("`", "~") and _FENCE.match(raw):
            in_code = not in_code
            continue
        if in_code:
            continue
        if not first or (first in _RULE_STARTS and _RULE.match(raw)):
            if paragraph:
                yield _clean(" ".join(paragraph))
                paragraph = []
            continue
        if first == "#" and _HEADING.match(raw):
            if paragraph:
                yield _clean(" ".join(paragraph))
                paragraph = []
            yield _clean(_HEADING.sub("", raw, count=1))
            continue
        bullet = _BULLET.match(raw) if first in _BULLET_STARTS or first.isdigit() else None
        if bullet:
            if paragraph:
                yield _clean(" ".join(paragraph))
            paragraph = [raw[bullet.end():]]
            continue
        line = _QUOTE.sub("", raw, count=1) if first == ">" else raw
        paragraph.append(line.replace("|", " ") if "|" in line else line)
    if paragraph:
        yield _clean(" ".join(paragraph))


def _link_text(match: re.Match[str]) -> str:
    return match.group(1)


def _clean(text: str) -> str:
    # The substitutions run only when their marks occur: most lines carry none.
    if "](" in text:
        text = _LINK.sub(_link_text, text)
    if "*" in text or "_" in text or "~" in text or "`" in text or "#" in text:
        text = _MARKS.sub("", text)
    return " ".join(text.split())


def sentences(body: str) -> Iterator[str]:
    for unit in units(body):
        if ". " in unit or "! " in unit or "? " in unit:
            for sentence in _SENTENCE_END.split(unit):
                if sentence:
                    yield sentence
        elif unit:
            yield unit


def _money(lower: str) -> bool:
    """Money or a share: ``$``/``€``/``£``/``¥`` before a number, a ``%`` after one, a number
    with ``k``/``m``/``bn``, or a currency code."""
    return bool(
        ("%" in lower and _PERCENT.search(lower))
        or (("$" in lower or "€" in lower or "£" in lower or "¥" in lower)
            and _CURRENCY.search(lower))
        or (_SCALED_HINT.search(lower) and _SCALED.search(lower))
        or (("usd" in lower or "eur" in lower or "gbp" in lower) and _CODE.search(lower)))


def _date(lower: str) -> bool:
    """An ISO date, a quarter, a month and day, or a weekday."""
    return bool(
        ("-" in lower and _ISO_DATE.search(lower))
        or ("q" in lower and _QUARTER.search(lower))
        or ("day" in lower and _WEEKDAY.search(lower))
        or (_MONTH_HINT.search(lower) and _MONTH_DAY.search(lower)))


def score(sentence: str) -> int:
    lower = sentence.lower()
    points = 3 if _CUES.search(lower) else 0
    if _DIGIT.search(sentence):
        points += 2
        if _money(lower):
            points += 1
        if _date(lower):
            points += 1
    elif "day" in lower and _WEEKDAY.search(lower):  # the only dates without a digit
        points += 1
    # Names: capitalised words after the first one ("I" never matches: one letter).
    return points + min(2, len(_NAME.findall(sentence, 1)))


def is_decision(sentence: str) -> bool:
    """Whether ``sentence`` carries a decision or commitment cue word (the +3 of
    ``score``)."""
    return bool(_CUES.search(sentence.lower()))


def _key(sentence: str) -> str:
    return sentence.rstrip(".!?;: ").casefold()


class ExtractiveSummarizer:
    """Offline and deterministic: the same events give the same summary, byte for byte."""

    provider = PROVIDER
    model = MODEL
    prompt_version = PROMPT_VERSION

    def __init__(self, *, max_sentences: int = 40, max_chars: int = 4000) -> None:
        if max_sentences < 1 or max_chars < 80:
            raise ValueError("an extractive summary needs room for at least one sentence")
        self.max_sentences = max_sentences
        self.max_chars = max_chars

    def summarize(self, scope: str, scope_ref: str, events: Sequence[EventText]) -> Summary:
        # (score, position, bullet line) of each sentence worth keeping
        kept: list[tuple[int, int, str]] = []
        firsts: list[tuple[int, int, str]] = []
        seen: set[str] = set()
        position = 0
        for event in events:
            prefix = f"- {event.occurred_at:%Y-%m-%d} ({event.kind}): "
            first = True
            for sentence in sentences(event.body):
                key = _key(sentence)
                if not key or key in seen:
                    continue
                if len(sentence) > MAX_SENTENCE_CHARS:
                    sentence = sentence[:MAX_SENTENCE_CHARS - 1].rstrip() + "…"
                points = score(sentence)
                if points >= KEEP_AT:
                    seen.add(key)
                    kept.append((points, position, prefix + sentence))
                elif first:
                    seen.add(key)
                    firsts.append((0, position, prefix + sentence))
                first = False
                position += 1
        chosen = self._bound(kept or firsts)
        return Summary(text="\n".join(chosen), provider=self.provider, model=self.model,
                       prompt_version=self.prompt_version, tokens_used=0)

    def _bound(self, candidates: list[tuple[int, int, str]]) -> list[str]:
        """The best candidates that fit, in their original order."""
        total = sum(len(line) + 1 for _, _, line in candidates)
        if len(candidates) <= self.max_sentences and total <= self.max_chars:
            return [line for _, _, line in candidates]
        taken: list[tuple[int, str]] = []
        used = 0
        for _points, position, line in sorted(candidates, key=lambda c: (-c[0], -c[1])):
            if used + len(line) + 1 > self.max_chars:
                continue
            taken.append((position, line))
            used += len(line) + 1
            if len(taken) == self.max_sentences:
                break
        taken.sort()
        return [line for _, line in taken]
