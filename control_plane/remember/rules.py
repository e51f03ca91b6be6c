"""The built-in extractor (``builtin-v1``): explicit first-person statements in English, from
the user's messages only, each turned into a fact with a deterministic key.

One rule a line in :data:`RULES`: a pattern over one sentence (lower-cased for matching, the
value taken from the original text) and the kind of fact it states. The key is the kind and
a short slug of the fact's *subject* (``uses.slack``, ``project.apollo-migration``), the
topic of a preference (``preference.tone``), or the kind alone for a fact a person has one
of (``name``, ``role``, ``team``); never the value, because a key is control-plane metadata.
A changed statement ("actually I prefer numbered lists", "I use Kubernetes 1.30 now") maps
onto the same key as the first, so reconciliation sees an UPDATE. A retraction is the
statement it takes back, with no value and the words it named the thing by, so that one
naming a stored *value* ("I don't use my iPad Air anymore") finds the memory holding it.

| statement | key | value |
|---|---|---|
| I prefer responses in bullet points | preference.response_format | bullet points |
| I prefer Spanish / to write in Spanish | preference.language | Spanish |
| I prefer a formal tone in emails | preference.tone | formal tone in emails |
| I prefer meetings before 11am | preference.meeting_time | meetings before 11am |
| I prefer aisle seats | preference.seat | aisle seats |
| I prefer Python for scripting | preference.scripting | Python for scripting |
| I prefer tea over coffee | preference.coffee-or-tea | tea over coffee |
| always reply in Spanish | preference.language | Spanish |
| I like / love / enjoy / hate jazz | likes.jazz | loves jazz |
| my name is Ana, call me Ana | name | Ana |
| my team is the data team | team | data |
| my on-call rotation is every third week | about.on-call-rotation | every third week |
| I work in finance / the data team / the Munich office | department / team / office | … |
| I work at / for Acme | employer | Acme |
| I work as a nurse, I'm a nurse | role | nurse |
| I use / I'm using / I switched to Kubernetes 1.29 | uses.kubernetes | Kubernetes 1.29 |
| I live in Lisbon, I'm based in Lisbon | location | Lisbon |
| I'm working on the Apollo migration | project.apollo-migration | Apollo migration |
| I'm migrating our CI to GitHub Actions | project.migrating-ci | migrating our CI to … |
| I had a problem with my VPN | issue.vpn | VPN |
| the VPN was fixed by reinstalling it | resolution.vpn | reinstalling it |
| my VPN broke and IT fixed it by … | resolution.vpn | IT fixed it by … |
| I don't use / no longer use / stopped using Slack | uses.slack (retracted) | |
| I don't like jazz anymore | likes.jazz (retracted) | |
| I'm not working on Apollo anymore, I finished Apollo | project.apollo (retracted) | |
| I don't work at Acme anymore, I left the data team | employer, team (retracted) | |
| I'm not on the on-call rotation anymore | about.on-call-rotation (retracted) | |
| I don't have my iPad anymore | about.ipad (retracted) | |
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

EXTRACTOR = "builtin-v1"


@dataclass(frozen=True)
class Fact:
    """One extracted fact: ``value`` None for a retraction. ``label`` heads the stored
    sentence (``Uses: Slack``); ``seqs`` are the messages it came from; ``names`` is how a
    retraction named what it takes back ("iPad Air"), for reconciliation to find a memory
    by its value when nothing is stored at the key."""

    key: str
    value: str | None
    label: str
    seqs: tuple[int, ...]
    memory_type: str = "fact"
    names: str | None = None

    @property
    def retraction(self) -> bool:
        return self.value is None


# What a fact is built from: the rule's match (original case) -> the fact (seqs to come).
Builder = Callable[[dict[str, str]], Fact | None]

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

# A preference's topic: (key, label, head nouns that name it, words that name it in a
# preference of at most three words). "a formal TONE in emails" and "casual" are both tone.
_TOPICS = (
    ("response_format", "Preferred response format",
     ("format", "answer", "response", "reply", "point", "list", "summary", "bullet"),
     _FORMATS),
    ("language", "Preferred language", ("language",), _LANGUAGES),
    ("tone", "Preferred tone", ("tone",), _TONES),
    ("contact_channel", "Preferred contact channel", ("channel",), _CHANNELS),
)
# Words that make a preference one about *when* ("meetings after 2pm": meeting_time).
_WHEN = re.compile(r"\b(?:before|after|around|between|until) \w|\b\d{1,2}(?::\d\d)?\s?[ap]m\b"
                   r"|\b(?:morning|afternoon|evening|noon|weekend|weekday|monday|tuesday|"
                   r"wednesday|thursday|friday|saturday|sunday)s?\b|\b(?:early|late)\b", re.I)
# The small words after a noun phrase: its head is the word before the first of them.
_LINKS = (r"\s+(?:in|on|at|for|with|by|via|from|before|after|around|between|until|during|"
          r"over|than|instead|rather|to|of|when|while|and|or)\s+")
# What a team, department or office is called without the word itself.
_UNITS = {"team": "team", "squad": "team", "group": "team", "unit": "team",
          "department": "department", "dept": "department", "office": "office"}
# A system's version after its name ("Kubernetes 1.29", "iPhone 15", "Python v3.12").
_VERSION = re.compile(r"\s+(?:v|version\s+)?\d+(?:\.\d+)*\b", re.I)
# Verbs of an ongoing piece of work ("I'm migrating our CI …").
_DOING = (r"(?:migrating|moving|upgrading|building|writing|drafting|preparing|planning|"
          r"organi[sz]ing|setting up|rolling out|launching|redesigning|rewriting|leading)")
# What goes wrong with a thing — a verb in the past (…ed) or one of these — and what
# someone did about it ("… and IT fixed it by …").
_TROUBLE = (r"(?:\w+ed|kept|keeps|broke|froze|was|got|went|would|wouldn't|didn't|couldn't|"
            r"could not)")
_FIX = (r"(?:fixed|solved|resolved|restored|replaced|repaired|reset|reinstalled|unlocked|"
        r"reactivated|sorted)")


def slug(text: str) -> str:
    """A short, stable slug of a fact's subject: lower case, articles dropped, at most four
    words and 40 characters, digit runs of three or more dropped (no number becomes a key)."""
    words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _ARTICLES]
    words = [w for w in words if not re.fullmatch(r"\d{3,}", w)][:_SLUG_WORDS]
    return "-".join(words)[:_SLUG_CHARS].strip("-")


def _head(text: str) -> str:
    """The thing itself, without what follows it ("Slack for team chat" -> "Slack")."""
    return re.split(r"\s*[,(]|\s+(?:for|to|at|on|with|in|from|because|since|when|as|every)"
                    r"\s+", text, maxsplit=1)[0]


def _bare(text: str) -> str:
    """Without a leading article or possessive."""
    return re.sub(r"^(?:a|an|the|my|our|some)\s+", "", text.strip(), flags=re.I)


def _tidy(text: str) -> str:
    """A value as kept: no following clause, no "now" or "last week", no leading article
    ("now a MacBook Pro" -> "MacBook Pro"; "Kubernetes 1.30 now, we upgraded" -> "Kubernetes
    1.30")."""
    text = re.split(r",\s+(?:we|i|it|they|he|she|so|but|and|because|which)\s", text.strip(),
                    maxsplit=1, flags=re.I)[0]
    text = re.sub(r"^(?:now|currently|still)\s+|\s+(?:now|currently|nowadays|these days|"
                  r"recently|yesterday|today|(?:last|this) (?:week|month|year))$", "", text,
                  flags=re.I)
    return _bare(text)


def _system(text: str) -> str:
    """A system's name without what follows it or its version ("Kubernetes 1.29 on GCP" ->
    "Kubernetes"): the same key whichever version the user is on."""
    return _VERSION.sub("", _head(_tidy(text)))


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


def _has(text: str, words: Iterable[str]) -> bool:
    lower = text.lower()
    return any(re.search(rf"\b{re.escape(w)}", lower) for w in words)


def _fact(key: str, value: str | None, label: str, memory_type: str = "fact") -> Fact:
    return Fact(key=key, value=value, label=label, seqs=(), memory_type=memory_type)


def _preference(m: dict[str, str]) -> Fact | None:
    """Keyed by what the preference is about — its topic, the head noun of what is preferred
    (with ``_time`` when it says when), its purpose ("for …"), the pair it chooses between —
    so that a changed preference lands on the key of the first."""
    what = _tidy(re.sub(r"^(?:(?:the |my )?(?:responses|answers|replies|messages|output)|"
                        r"to get (?:responses|answers)|to be answered|to be contacted|"
                        r"being contacted|to (?:write|talk|speak|chat)|)\s*"
                        r"(?:in|as|with|by|via|using)\s+", "", m["what"].strip(), flags=re.I))
    first = re.split(_LINKS, what, maxsplit=1, flags=re.I)[0]
    head = _singular(first.split()[-1].lower()) if first.split() else ""
    short = len(what.split()) <= 3
    if not head or what.lower().startswith("not "):  # "I prefer not to say"
        return None

    def preferred(topic: str, label: str) -> Fact:
        return _fact(f"preference.{topic}", what, label, "preference")

    if re.search(r"contact|reach", m["what"], re.I):
        return preferred("contact_channel", "Preferred contact channel")
    for topic, label, heads, _words in _TOPICS:
        if head in heads:
            return preferred(topic, label)
    if re.fullmatch(r"[a-z][a-z-]*", head) and _WHEN.search(what):
        return preferred(f"{head.replace('-', '_')}_time", f"Preferred {head} time")
    for topic, label, _heads, words in _TOPICS:
        if short and _has(what, words):
            return preferred(topic, label)
    purpose = re.search(r"\bfor\s+(?P<purpose>.+)$", what, re.I)
    choice = re.fullmatch(r"(?P<a>.+?)\s+(?:over|rather than|instead of)\s+(?P<b>.+)", what,
                          re.I)
    if purpose and slug(purpose["purpose"]):
        key = slug(purpose["purpose"])
    elif choice and slug(choice["a"]) and slug(choice["b"]):
        key = "-or-".join(sorted((slug(choice["a"]), slug(choice["b"]))))
    elif re.fullmatch(r"[a-z][a-z-]*", head) and not what.lower().startswith("to "):
        key = head
    else:
        key = slug(what)
    return preferred(key, "Prefers") if key else None


def _likes(m: dict[str, str]) -> Fact | None:
    verb = m["verb"].lower()
    thing = _bare(m["thing"])
    key = slug(thing)
    verb = {"dislike": "dislikes"}.get(verb, verb + "s")
    return _fact(f"likes.{key}", f"{verb} {thing}", "Opinion", "preference") if key else None


def _name(m: dict[str, str]) -> Fact | None:
    name = m["name"].strip()
    return None if len(name.split()) > 4 else _fact("name", name, "Name")


def _unit(where: str, default: str) -> tuple[str, str]:
    """(key, name) of where someone works: "the data team" -> ("team", "data")."""
    words = _tidy(where).split()
    if len(words) > 1 and words[-1].lower() in _UNITS:
        return _UNITS[words[-1].lower()], " ".join(words[:-1])
    return default, " ".join(words)


_MY_THING = {"name": ("name", "Name"), "role": ("role", "Role"), "job": ("role", "Role"),
             "job title": ("role", "Role"), "title": ("role", "Role"),
             "department": ("department", "Department"), "team": ("team", "Team"),
             "office": ("office", "Office"), "employer": ("employer", "Employer"),
             "company": ("employer", "Employer")}


def _my(m: dict[str, str]) -> Fact | None:
    thing = m["thing"].strip().lower()
    if thing in _MY_THING:
        key, label = _MY_THING[thing]
        value = _unit(m["value"], key)[1] if key in _UNITS.values() else _tidy(m["value"])
        return _fact(key, value, label)
    key = slug(thing)
    return _fact(f"about.{key}", _tidy(m["value"]), f"Their {thing}") if key else None


def _work(m: dict[str, str]) -> Fact | None:
    kind = m["how"].lower()
    if kind == "in":
        return _member({"where": m["where"]})
    where = _tidy(m["where"])
    return _fact("role", where, "Role") if kind == "as" else _fact("employer", where, "Employer")


def _member(m: dict[str, str]) -> Fact | None:
    """In a team, department or office; anything else one is in or on ("the on-call
    rotation") is about that."""
    key, name = _unit(m["where"], "department")
    if key != "department" or m.get("how", "in") == "in":
        return _fact(key, name, key.capitalize()) if name else None
    about = slug(name)
    return _fact(f"about.{about}", name, f"Their {name}") if about else None


def _role(m: dict[str, str]) -> Fact | None:
    role = m["role"].strip()
    if len(role.split()) > 4 or role.lower().startswith(_NOT_ROLES):
        return None
    return _fact("role", role, "Role")


def _uses(m: dict[str, str]) -> Fact | None:
    thing = _tidy(m["thing"])
    key = slug(_system(thing))
    return _fact(f"uses.{key}", thing, "Uses") if key else None


def _project(m: dict[str, str]) -> Fact | None:
    """An ongoing piece of work, by its name ("the Apollo migration") or by what is being
    done to what ("migrating our CI …": ``project.migrating-ci``)."""
    doing = (m.get("doing") or "").lower()
    if doing in ("", "working on", "work on"):
        project = _tidy(m["thing"])
        key = slug(project)
    else:
        project = f"{doing} {m['thing'].strip()}"
        key = slug(f"{doing} {_bare(_head(m['thing']))}")
    return _fact(f"project.{key}", project, "Working on") if key else None


def _had(m: dict[str, str]) -> Fact | None:
    thing = _tidy(m["thing"])
    key = slug(thing)
    return _fact(f"about.{key}", thing, f"Their {thing}") if key else None


def _issue(m: dict[str, str]) -> Fact | None:
    thing = _tidy(m["thing"])
    key = slug(_system(thing))
    return _fact(f"issue.{key}", thing, "Had a problem with") if key else None


def _resolution(m: dict[str, str]) -> Fact | None:
    key = slug(_system(m["thing"]))
    fix = m["fix"].strip()
    return _fact(f"resolution.{key}", fix, f"{_bare(m['thing'])} was fixed by") \
        if key else None


def _incident(m: dict[str, str]) -> Fact | None:
    """What went wrong with a thing and who fixed it how, keyed as its resolution."""
    key = slug(_system(m["thing"]))
    fix = re.sub(r"^it (?:was|got) ", "", m["fix"].strip(), flags=re.I)
    label = f"{m['thing'].strip()} {m['trouble'].strip()}"
    return _fact(f"resolution.{key}", fix, label[:1].upper() + label[1:]) if key else None


def _location(m: dict[str, str]) -> Fact | None:
    return _fact("location", _tidy(m["place"]), "Based in")


def _no_longer(build: Builder) -> Builder:
    """The retraction of what ``build`` states: its key, no value, and the value it would
    have had as what the retraction names."""
    def retract(m: dict[str, str]) -> Fact | None:
        stated = build(m)
        if stated is None:
            return None
        return replace(stated, value=None, label="", names=stated.value)
    return retract


_ANYMORE = r"(?:\s+any\s?more|\s+any\s+longer)?"
_I_AM = r"(?:i'm|i am|im)"
_I_DONT = r"i (?:don't|do not|dont|no longer)"
_I_AM_NOT = rf"{_I_AM} (?:not|no longer)"
_I_STOPPED = r"i(?:'ve| have)? (?:stopped|quit)"

# (pattern, builder): the first rule whose pattern matches a sentence wins, so retractions
# come before the statements they retract.
RULES: tuple[tuple[str, Builder], ...] = (
    (rf"^(?:{_I_DONT} use|{_I_AM_NOT} using|{_I_STOPPED} using) (?P<thing>.+?){_ANYMORE}$",
     _no_longer(_uses)),
    (rf"^{_I_DONT} (?P<verb>like|love|enjoy) (?P<thing>.+?){_ANYMORE}$", _no_longer(_likes)),
    (rf"^(?:{_I_DONT}|{_I_AM_NOT}|{_I_STOPPED}) (?P<doing>work on|working on|{_DOING}) "
     rf"(?P<thing>.+?){_ANYMORE}$", _no_longer(_project)),
    (rf"^i(?:'ve| have)? (?:finished|completed) (?:(?P<doing>working on|{_DOING}) )?"
     rf"(?P<thing>.+)$", _no_longer(_project)),
    (rf"^{_I_DONT} work (?P<how>in|at|for|as) (?P<where>.+?){_ANYMORE}$", _no_longer(_work)),
    (rf"^(?:{_I_AM_NOT} (?P<how>in|on|part of)|i(?:'ve| have)? left) (?P<where>.+?)"
     rf"{_ANYMORE}$", _no_longer(_member)),
    (rf"^{_I_DONT} have (?P<thing>.+?){_ANYMORE}$", _no_longer(_had)),
    (r"^i(?: now| really| still)? prefer (?P<what>.+)$", _preference),
    (r"^(?:please )?(?:always )?(?:reply|respond|answer|write)(?: to me)? "
     r"(?P<what>(?:in|with|using) .+)$", _preference),
    (r"^my (?:preference|preferred format) is (?P<what>.+)$", _preference),
    (r"^i (?P<verb>like|love|enjoy|hate|dislike) (?P<thing>.+)$", _likes),
    (r"^(?:please )?call me (?P<name>.+)$", _name),
    (rf"^(?:[\w ,]{{0,30}} )?my (?P<thing>[\w -]+?) (?P<trouble>{_TROUBLE}\b.*?),? and "
     rf"(?P<fix>.*?\b{_FIX}\b.*)$", _incident),
    (r"^my (?P<thing>[a-z0-9][a-z0-9 -]{0,30}?) is (?P<value>.+)$", _my),
    (r"^i work (?P<how>in|at|for|as) (?P<where>.+)$", _work),
    (rf"^(?:{_I_AM}|i've been|i have been) (?:currently |now |still )?"
     rf"(?P<doing>working on|{_DOING}) (?P<thing>.+)$", _project),
    (rf"^(?:i live in|{_I_AM} based in|{_I_AM} located in) (?P<place>.+)$", _location),
    (rf"^{_I_AM} in (?P<where>.+ (?:{'|'.join(_UNITS)}))$", _member),
    (rf"^{_I_AM} an? (?P<role>[a-z][a-z -]+)$", _role),
    (rf"^(?:i(?: mostly| mainly| now| also)? use|{_I_AM} (?:now )?using|"
     rf"i(?:'ve| have)? (?:switched|upgraded) to) (?P<thing>.+)$", _uses),
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
        fact = build({k: v for k, v in match.groupdict().items() if v is not None})
        return None if fact is None else replace(fact, seqs=(seq,))
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
