"""The built-in extractor (``builtin-v1``): explicit first-person statements in English, from
the user's messages only, each turned into a fact with a deterministic key.

One rule a line in :data:`RULES`: a pattern over one sentence (lower-cased for matching, the
value taken from the original text) and the kind of fact it states. The key is the kind and
a short slug of the fact's *subject* (``uses.slack``, ``project.apollo-migration``) or the
kind alone for a fact a person has one of (``name``, ``role``); never the value, because a
key is control-plane metadata. A changed statement ("actually I prefer numbered lists") maps
onto the same key as the first, so reconciliation sees an UPDATE.

| statement | key | value |
|---|---|---|
| I prefer responses in bullet points | preference.response_format | bullet points |
| I prefer Spanish / to write in Spanish | preference.language | Spanish |
| I prefer tea over coffee | preference.tea-over-coffee | tea over coffee |
| always reply in Spanish | preference.language | Spanish |
| I like / love / enjoy / hate jazz | likes.jazz | loves jazz |
| my name is Ana, call me Ana | name | Ana |
| my <thing> is … | about.<thing> | … |
| I work in finance | department | finance |
| I work at / for Acme | employer | Acme |
| I work as a nurse, I'm a nurse | role | nurse |
| I use / I'm using / I switched to Slack | uses.slack | Slack |
| I live in Lisbon, I'm based in Lisbon | location | Lisbon |
| I'm working on the Apollo migration | project.apollo-migration | Apollo migration |
| I had a problem with my VPN | issue.vpn | VPN |
| the VPN was fixed by reinstalling it | resolution.vpn | reinstalling it |
| I don't use / no longer use / stopped using Slack | uses.slack (retracted) | |
| I don't like jazz anymore | likes.jazz (retracted) | |
| I'm not working on Apollo anymore | project.apollo (retracted) | |
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

EXTRACTOR = "builtin-v1"


@dataclass(frozen=True)
class Fact:
    """One extracted fact: ``value`` None for a retraction. ``label`` heads the stored
    sentence (``Uses: Slack``); ``seqs`` are the messages it came from."""

    key: str
    value: str | None
    label: str
    seqs: tuple[int, ...]
    memory_type: str = "fact"

    @property
    def retraction(self) -> bool:
        return self.value is None


# What a fact is built from: the rule's match (original case) -> (key, value, label, type).
Built = tuple[str, str | None, str, str] | None
Builder = Callable[[dict[str, str]], Built]

_ARTICLES = {"a", "an", "the", "my", "our", "your", "some", "this", "that", "these"}
_SLUG_WORDS = 4
_SLUG_CHARS = 40

_FORMATS = ("bullet", "numbered", "list", "table", "paragraph", "prose", "markdown",
            "short", "brief", "concise", "detailed", "summary", "summaries", "step by step",
            "plain text", "one-liner", "emoji")
_LANGUAGES = ("english", "spanish", "french", "german", "italian", "portuguese", "dutch",
              "polish", "chinese", "japanese", "korean", "arabic", "russian", "hindi",
              "turkish", "swedish", "norwegian", "danish", "finnish", "greek", "hebrew")
_TONES = ("formal", "informal", "casual", "friendly", "professional", "direct")
_CHANNELS = ("email", "phone", "call", "text message", "sms", "slack", "teams", "whatsapp")
_NOT_ROLES = ("bit", "little", "lot", "fan", "big fan", "huge fan", "sure", "not", "so",
              "very", "really", "going", "trying", "looking", "happy", "sorry", "glad")


def slug(text: str) -> str:
    """A short, stable slug of a fact's subject: lower case, articles dropped, at most four
    words and 40 characters, digit runs of three or more dropped (no number becomes a key)."""
    words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _ARTICLES]
    words = [w for w in words if not re.fullmatch(r"\d{3,}", w)][:_SLUG_WORDS]
    return "-".join(words)[:_SLUG_CHARS].strip("-")


def _head(text: str) -> str:
    """The thing itself, without what follows it ("Slack for team chat" -> "Slack")."""
    return re.split(r"\s*[,(]|\s+(?:for|to|at|on|with|in|because|since|when|as|every)\s+",
                    text, maxsplit=1)[0]


def _bare(text: str) -> str:
    """Without a leading article or possessive."""
    return re.sub(r"^(?:a|an|the|my|our|some)\s+", "", text.strip(), flags=re.I)


def _has(text: str, words: Iterable[str]) -> bool:
    lower = text.lower()
    return any(re.search(rf"\b{re.escape(w)}", lower) for w in words)


def _preference(m: dict[str, str]) -> Built:
    what = re.sub(r"^(?:(?:the |my )?(?:responses|answers|replies|messages|output)|to get "
                  r"(?:responses|answers)|to be answered|to be contacted|being contacted|"
                  r"to (?:write|talk|speak|chat)|)\s*(?:in|as|with|by|via|using)\s+", "",
                  m["what"].strip(), flags=re.I)
    if _has(what, _LANGUAGES) and len(what.split()) <= 3:
        return "preference.language", what, "Preferred language", "preference"
    if re.search(r"contact|reach", m["what"], re.I) or (
            _has(what, _CHANNELS) and len(what.split()) <= 3):
        return "preference.contact_channel", what, "Preferred contact channel", "preference"
    if _has(what, _FORMATS):
        return "preference.response_format", what, "Preferred response format", "preference"
    if _has(what, _TONES) and len(what.split()) <= 3:
        return "preference.tone", what, "Preferred tone", "preference"
    key = slug(what)
    return (f"preference.{key}", what, "Prefers", "preference") if key else None


def _likes(m: dict[str, str]) -> Built:
    verb = m["verb"].lower()
    thing = _bare(m["thing"])
    key = slug(thing)
    verb = {"dislike": "dislikes"}.get(verb, verb + "s")
    return (f"likes.{key}", f"{verb} {thing}", "Opinion", "preference") if key else None


def _name(m: dict[str, str]) -> Built:
    name = m["name"].strip()
    if len(name.split()) > 4:
        return None
    return "name", name, "Name", "fact"


_MY_THING = {"name": ("name", "Name"), "role": ("role", "Role"), "job": ("role", "Role"),
             "job title": ("role", "Role"), "title": ("role", "Role"),
             "department": ("department", "Department"), "team": ("department", "Department"),
             "employer": ("employer", "Employer"), "company": ("employer", "Employer")}


def _my(m: dict[str, str]) -> Built:
    thing = m["thing"].strip().lower()
    if thing in _MY_THING:
        key, label = _MY_THING[thing]
        return key, m["value"].strip(), label, "fact"
    key = slug(thing)
    return (f"about.{key}", m["value"].strip(), f"Their {thing}", "fact") if key else None


def _work(m: dict[str, str]) -> Built:
    where = _bare(m["where"])
    kind = m["how"].lower()
    if kind == "as":
        return "role", where, "Role", "fact"
    if kind == "in":
        where = re.sub(r"\s+(?:team|department|dept)$", "", where, flags=re.I)
        return "department", where, "Department", "fact"
    return "employer", where, "Employer", "fact"


def _team(m: dict[str, str]) -> Built:
    return _work({"how": "in", "where": m["where"]})


def _role(m: dict[str, str]) -> Built:
    role = m["role"].strip()
    if len(role.split()) > 4 or role.lower().startswith(_NOT_ROLES):
        return None
    return "role", role, "Role", "fact"


def _uses(m: dict[str, str]) -> Built:
    thing = _bare(m["thing"])
    key = slug(_head(thing))
    return (f"uses.{key}", thing, "Uses", "fact") if key else None


def _project(m: dict[str, str]) -> Built:
    project = _bare(m["project"])
    key = slug(project)
    return (f"project.{key}", project, "Working on", "fact") if key else None


def _issue(m: dict[str, str]) -> Built:
    thing = _bare(m["thing"])
    key = slug(_head(thing))
    return (f"issue.{key}", thing, "Had a problem with", "fact") if key else None


def _resolution(m: dict[str, str]) -> Built:
    key = slug(_head(_bare(m["thing"])))
    fix = m["fix"].strip()
    return (f"resolution.{key}", fix, f"{_bare(m['thing'])} was fixed by", "fact") \
        if key else None


_RETRACTED = {"use": "uses", "using": "uses", "like": "likes", "love": "likes",
              "enjoy": "likes", "work on": "project", "working on": "project"}


def _location(m: dict[str, str]) -> Built:
    return "location", _bare(m["place"]), "Based in", "fact"


def _retraction(m: dict[str, str]) -> Built:
    kind = _RETRACTED[re.sub(r"\s+", " ", m["verb"].lower())]
    thing = _bare(m["thing"])
    key = slug(_head(thing) if kind == "uses" else thing)
    return (f"{kind}.{key}", None, "", "fact") if key else None


_ANYMORE = r"(?:\s+any\s?more|\s+any\s+longer)?"
_I_AM = r"(?:i'm|i am|im)"

# (pattern, builder): the first rule whose pattern matches a sentence wins, so retractions
# come before the statements they retract.
RULES: tuple[tuple[str, Builder], ...] = (
    (rf"^i (?:don't|do not|dont|no longer) (?P<verb>use|like|love|enjoy|work on) "
     rf"(?P<thing>.+?){_ANYMORE}$", _retraction),
    (rf"^{_I_AM} (?:not|no longer) (?P<verb>using|working on) (?P<thing>.+?){_ANYMORE}$",
     _retraction),
    (r"^i(?:'ve| have)? (?:stopped|quit) (?P<verb>using|working on) (?P<thing>.+)$",
     _retraction),
    (r"^i(?: now| really| still)? prefer (?P<what>.+)$", _preference),
    (r"^(?:please )?(?:always )?(?:reply|respond|answer|write)(?: to me)? "
     r"(?P<what>(?:in|with|using) .+)$", _preference),
    (r"^my (?:preference|preferred format) is (?P<what>.+)$", _preference),
    (r"^i (?P<verb>like|love|enjoy|hate|dislike) (?P<thing>.+)$", _likes),
    (r"^(?:please )?call me (?P<name>.+)$", _name),
    (r"^my (?P<thing>[a-z][a-z ]{0,30}?) is (?P<value>.+)$", _my),
    (r"^i work (?P<how>in|at|for|as) (?P<where>.+)$", _work),
    (rf"^(?:{_I_AM}|i've been|i have been) (?:currently |now )?working on (?P<project>.+)$",
     _project),
    (rf"^(?:i live in|{_I_AM} based in|{_I_AM} located in) (?P<place>.+)$", _location),
    (rf"^{_I_AM} in the (?P<where>.+?) (?:team|department)$",
     _team),
    (rf"^{_I_AM} an? (?P<role>[a-z][a-z -]+)$", _role),
    (rf"^(?:i(?: mostly| mainly| now| also)? use|{_I_AM} (?:now )?using|i switched to) "
     rf"(?P<thing>.+)$", _uses),
    (r"^i had (?:a|an|some) (?:problem|issue|trouble) with (?P<thing>.+)$", _issue),
    (r"^(?P<thing>.+?) (?:was|got) fixed by (?P<fix>.+)$", _resolution),
)
_COMPILED = tuple((re.compile(p, re.I), build) for p, build in RULES)

_LEAD = re.compile(r"^(?:(?:actually|also|oh|well|ok|okay|so|btw|by the way|just so you "
                   r"know|fyi|hi|hey|hello|and|but|now|yes|no|please note|from now on)"
                   r"[,:]?\s+)+", re.I)
_TRAIL = re.compile(r"(?:,?\s+(?:please|thanks|thank you|now|instead|though|too))+$", re.I)


def sentences(text: str) -> list[str]:
    """The sentences of a message, trimmed of fillers ("actually, …", "… please")."""
    parts = re.split(r"(?<=[.!?;])\s+|\n+|[.!?;]+$", text)
    cleaned = []
    for part in parts:
        part = part.strip().strip(".!?;").replace("’", "'").strip()
        part = _TRAIL.sub("", _LEAD.sub("", part)).strip(" ,")
        if part:
            cleaned.append(part)
    return cleaned


def facts_of(sentence: str, seq: int) -> Fact | None:
    """The fact one sentence states, by the first rule that matches; None if none does."""
    for pattern, build in _COMPILED:
        match = pattern.match(sentence)
        if match is None:
            continue
        built = build({k: v for k, v in match.groupdict().items() if v is not None})
        if built is None:
            return None
        key, value, label, memory_type = built
        return Fact(key=key, value=value, label=label, seqs=(seq,), memory_type=memory_type)
    return None


def extract(messages: Iterable[tuple[int, str, str]]) -> list[tuple[str, Fact | None]]:
    """Every user sentence with the fact it states (or None): ``messages`` are (seq, role,
    content), oldest first; the sentence is kept so the caller can screen it."""
    found: list[tuple[str, Fact | None]] = []
    for seq, role, content in messages:
        if role != "user":
            continue
        for sentence in sentences(content):
            found.append((sentence, facts_of(sentence, seq)))
    return found
