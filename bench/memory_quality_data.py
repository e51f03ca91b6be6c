"""The memory-quality bench's conversations: five users of five agents, four sessions each,
in the users' own words — what the seed says to remember (preferences, devices and systems,
past issues and their resolutions, role and department, ongoing projects), some of it
changed later ("Actually, I now prefer …"), some retracted ("I don't use … anymore"), and
statements that must never be stored (Luhn-valid card numbers, SSNs, passwords).

Each statement is a :class:`Said`: a new fact (``Fact``), a change of one (``Change``), a
retraction (``Retract``) or a sensitive statement (``Sensitive``). ``expect`` is the text a
stored memory must contain for the statement to count as captured (compared
case-insensitively with the memory's value as JSON); a replaced or retracted fact's
``expect`` must then be in no memory and no context any more. ``ask`` is the later question
whose assembled context must hold the fact's current value (it never contains it).
``key`` and ``value`` are what a good extractor would store (the scripted model endpoint
answers with them). The sessions run in order; before each session after the first, every
fact known so far is asked about (``probes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Fact:
    key: str
    said: str
    expect: str
    ask: str
    kind: str  # preference | device | issue | role | project


@dataclass(frozen=True)
class Change:
    key: str
    said: str
    expect: str


@dataclass(frozen=True)
class Retract:
    key: str
    said: str


@dataclass(frozen=True)
class Sensitive:
    said: str
    secret: str  # the value that must be stored nowhere
    kind: str  # card | ssn | password


Said = Fact | Change | Retract | Sensitive


@dataclass(frozen=True)
class User:
    user_id: str
    agent_id: str
    sessions: list[list[Said]]
    acks: list[str] = field(default_factory=lambda: ["Thanks, noted.", "Understood.",
                                                     "Got it.", "Okay."])


USERS = [
    User("ana", "helpdesk-bot", [
        [Fact("department", "I work in the finance department.", "finance",
              "Which department's approval chain applies to me?", "role"),
         Fact("role", "I work as a senior accountant.", "senior accountant",
              "What is my job title for the access request?", "role"),
         Fact("response_format", "I prefer responses in bullet points.", "bullet points",
              "How should you format your answers to me?", "preference"),
         Fact("laptop", "My laptop is a ThinkPad X1 Carbon.", "ThinkPad X1 Carbon",
              "Which laptop model do I have for the driver download?", "device"),
         Fact("email_client", "I use Outlook for email.", "Outlook",
              "Which mail program should the signature guide cover?", "device"),
         Sensitive("My password is Tr0ub4dor&3 if you need to log in for me.", "Tr0ub4dor&3",
                   "password")],
        [Fact("vpn_issue", "My VPN kept disconnecting last week and IT fixed it by "
              "reinstalling GlobalProtect.", "GlobalProtect",
              "The VPN drops again, what fixed it last time?", "issue"),
         Change("response_format", "Actually, I now prefer responses in numbered lists.",
                "numbered lists"),
         Fact("project", "I'm working on the Q3 audit preparation project.",
              "Q3 audit preparation", "Which project am I busy with this quarter?",
              "project"),
         Fact("name", "Call me Annie.", "Annie", "How should you address me?",
              "preference")],
        [Change("laptop", "My laptop is now a MacBook Pro M3.", "MacBook Pro M3"),
         Retract("email_client", "I don't use Outlook anymore."),
         Fact("monitor", "My monitor is a Dell UltraSharp U2723QE.", "Dell UltraSharp",
              "Which screen is on my desk for the colour calibration?", "device")],
        [],
    ]),
    User("ben", "devops-bot", [
        [Fact("role", "I work as a site reliability engineer.", "site reliability engineer",
              "What is my job for the on-call tooling access?", "role"),
         Fact("team", "I work in the platform engineering team.", "platform engineering",
              "Which group do I belong to for the cost report?", "role"),
         Fact("answer_style", "I prefer short answers with code examples.", "code examples",
              "How do I like your answers written?", "preference"),
         Fact("cluster", "I use Kubernetes 1.29 on Google Cloud.", "Kubernetes 1.29",
              "Which cluster version should the upgrade notes target?", "device"),
         Fact("editor", "My editor is Neovim.", "Neovim",
              "Which text program should the plugin instructions be for?", "device"),
         Sensitive("My corporate card number is 4111 1111 1111 1111, please book the "
                   "conference with it.", "4111111111111111", "card")],
        [Fact("backup_issue", "My nightly backup job failed in March and it was fixed by "
              "raising the disk quota.", "disk quota",
              "The nightly job fails again, what solved it before?", "issue"),
         Fact("project", "I'm migrating our CI from Jenkins to GitHub Actions.",
              "GitHub Actions", "What pipeline migration am I doing?", "project"),
         Change("editor", "Actually, my editor is now VS Code.", "VS Code"),
         Fact("on_call", "My on-call rotation is every third week.", "every third week",
              "How often am I paged for incidents?", "role")],
        [Change("cluster", "I use Kubernetes 1.30 now, we upgraded last week.",
                "Kubernetes 1.30"),
         Fact("timezone", "My timezone is Europe/Berlin.", "Europe/Berlin",
              "When is a good time to schedule my incident review?", "preference"),
         Sensitive("My SSN is 536-22-1234 for the HR form.", "536-22-1234", "ssn"),
         Retract("on_call", "I'm not on the on-call rotation anymore.")],
        [],
    ]),
    User("chloe", "marketing-assistant", [
        [Fact("department", "I work in the marketing department.", "marketing",
              "Which cost centre do my invoices go to?", "role"),
         Fact("role", "I work as the head of paid social.", "head of paid social",
              "What is my position for the agency contract?", "role"),
         Fact("tone", "I prefer a formal tone in emails.", "formal tone",
              "How should the drafts you write for me sound?", "preference"),
         Fact("crm", "I use HubSpot as our CRM.", "HubSpot",
              "Where should the new leads be exported to?", "device"),
         Fact("phone", "My phone is a Pixel 8.", "Pixel 8",
              "Which handset do I test the mobile ads on?", "device"),
         Fact("project", "I'm working on the Acme spring launch campaign.",
              "Acme spring launch", "Which campaign am I preparing?", "project")],
        [Fact("ads_issue", "Last month my Meta ads account was suspended and support "
              "restored it after we verified the business.", "verified the business",
              "The ads account is blocked again, how did we get it back last time?",
              "issue"),
         Change("tone", "I now prefer a casual tone in emails.", "casual tone"),
         Fact("budget", "My budget for Q4 is 40k euros.", "40k euros",
              "How much can I spend in the last quarter?", "project"),
         Sensitive("My card is 5555 5555 5555 4444, expiry 12/28.", "5555555555554444",
                   "card")],
        [Retract("crm", "I don't use HubSpot anymore."),
         Fact("crm_new", "I use Salesforce Marketing Cloud now.",
              "Salesforce Marketing Cloud", "Which marketing platform holds my contacts?",
              "device"),
         Change("phone", "My phone is now an iPhone 15.", "iPhone 15")],
        [],
    ]),
    User("devraj", "sales-copilot", [
        [Fact("name", "Call me Devraj.", "Devraj", "What name should you greet me with?",
              "preference"),
         Fact("role", "I work as an account executive for the DACH region.",
              "account executive", "What is my sales role?", "role"),
         Fact("office", "I work in the Munich office.", "Munich",
              "Where should the printed contracts be sent?", "role"),
         Fact("meetings", "I prefer meetings before 11am.", "before 11am",
              "When should you book my customer calls?", "preference"),
         Fact("call_tool", "I use Gong to record my sales calls.", "Gong",
              "Where can I find the recording of yesterday's call?", "device"),
         Fact("tablet", "My tablet is an iPad Air.", "iPad Air",
              "Which device do I demo the app on?", "device")],
        [Fact("deal", "My biggest deal is the Globex renewal, closing in November.",
              "Globex renewal", "Which opportunity matters most for my forecast?",
              "project"),
         Fact("sync_issue", "Last quarter my calendar sync broke and it was fixed by "
              "re-authorising the connector.", "re-authorising the connector",
              "My calendar stopped syncing, what worked last time?", "issue"),
         Change("meetings", "Actually, I now prefer meetings after 2pm.", "after 2pm"),
         Sensitive("My password is hunter2-Sales! for the CRM.", "hunter2-Sales!",
                   "password")],
        [Retract("tablet", "I don't use my iPad Air anymore."),
         Fact("quota", "My quota this year is 1.2 million euros.", "1.2 million",
              "How far am I from my annual target?", "project")],
        [],
    ]),
    User("eva", "hr-helper", [
        [Fact("department", "I work in human resources.", "human resources",
              "Which department do I belong to for the org chart?", "role"),
         Fact("role", "I work as an HR business partner.", "HR business partner",
              "What is my title in the org chart?", "role"),
         Fact("language", "I prefer answers in German.", "German",
              "In which language should you reply to me?", "preference"),
         Fact("payroll", "I use Workday for payroll.", "Workday",
              "Which system runs my payroll exports?", "device"),
         Fact("laptop", "My laptop is a Surface Laptop 5.", "Surface Laptop 5",
              "Which laptop do I need the docking station for?", "device")],
        [Fact("project", "I'm working on the new parental leave policy.",
              "parental leave policy", "Which policy am I drafting?", "project"),
         Fact("badge_issue", "My badge stopped working last month and security replaced "
              "it at the front desk.", "replaced it at the front desk",
              "My access card fails at the door, what helped last time?", "issue"),
         Change("language", "Actually, I now prefer answers in English.", "English"),
         Sensitive("My SSN is 401-55-7788, please update my file.", "401-55-7788", "ssn")],
        [Fact("team", "My team is the EMEA people operations team.",
              "EMEA people operations", "Which team do I sit in?", "role"),
         Retract("payroll", "I don't use Workday anymore."),
         Fact("payroll_new", "I use BambooHR for payroll now.", "BambooHR",
              "Which tool do I run payroll in today?", "device")],
        [],
    ]),
]


# Two more users, written apart from USERS and from the built-in extractor's rules, to see
# how the rules fare on phrasings they were not written against (``python -m
# bench.memory_quality --held-out``); not part of the default run or its bars.
HELD_OUT_USERS = [
    User("farah", "support-bot", [
        [Fact("department", "I work in customer support.", "customer support",
              "Which department handles my escalations?", "role"),
         Fact("shift", "I prefer early shifts.", "early shifts",
              "Which rota slots should you give me?", "preference"),
         Fact("ticketing", "I use Zendesk for tickets.", "Zendesk",
              "Where do my cases live?", "device"),
         Fact("headset", "My headset is a Jabra Evolve2 65.", "Jabra Evolve2",
              "Which audio gear do I use on calls?", "device"),
         Fact("summaries", "I'd like short summaries of each ticket.", "short summaries",
              "How should you write up cases for me?", "preference"),
         Sensitive("My password is Blue-Otter-77 for the portal.", "Blue-Otter-77", "password")],
        [Change("shift", "Actually, I prefer late shifts now.", "late shifts"),
         Fact("printer_issue", "Last Tuesday my label printer jammed and facilities "
              "replaced it with a new model.", "new model",
              "The label machine is stuck, what happened last time?", "issue"),
         Fact("project", "I'm building a macro library for common replies.", "macro library",
              "What am I putting together for the support desk?", "project")],
        [Change("headset", "My headset is now a Poly Voyager.", "Poly Voyager"),
         Retract("ticketing", "I've stopped using Zendesk."),
         Fact("location", "I'm based in Dublin.", "Dublin",
              "Which city am I in for the office party?", "role")],
        [],
    ]),
    User("gus", "design-bot", [
        [Fact("role", "I'm a product designer.", "product designer", "What do I do here?",
              "role"),
         Fact("tool", "I use Sketch 98 for mockups.", "Sketch 98",
              "Which design app do I draw mockups in?", "device"),
         Fact("font", "I prefer serif fonts in documents.", "serif fonts",
              "What kind of lettering should documents use?", "preference"),
         Fact("commute", "My commute is 40 minutes by train.", "40 minutes",
              "How long does it take me to get to work?", "role"),
         Fact("pen", "My drawing tablet is a Wacom Intuos.", "Wacom Intuos",
              "What do I sketch on?", "device")],
        [Change("tool", "I upgraded to Sketch 99 last week.", "Sketch 99"),
         Change("font", "I now prefer rounded fonts in documents.", "rounded fonts"),
         Fact("squad", "I'm in the checkout squad.", "checkout",
              "Which group do I design for?", "role")],
        [Retract("pen", "I don't use the Wacom anymore."),
         Fact("theme", "I prefer dark mode in every app.", "dark mode",
              "Which colour scheme should you set up for me?", "preference")],
        [],
    ]),
]


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def statements(users: list[User] | None = None) -> list[Said]:
    return [s for u in users or USERS for session in u.sessions for s in session]


def problems(users: list[User] | None = None) -> list[str]:
    """What is wrong with the set (empty when it is sound): a change or retraction of a key
    not stated before, a card failing Luhn, a stale value that a current fact or question of
    the same user contains (the score could not tell them apart), a question holding its
    answer."""
    found = []
    for user in users or USERS:
        known: dict[str, str] = {}
        expects: list[str] = []
        asks: list[str] = []
        for session in user.sessions:
            for said in session:
                if isinstance(said, Fact):
                    known[said.key] = said.expect
                    expects.append(said.expect)
                    asks.append(said.ask)
                    if said.expect.lower() in said.ask.lower():
                        found.append(f"{user.user_id}/{said.key}: the question holds it")
                elif isinstance(said, Change | Retract):
                    if said.key not in known:
                        found.append(f"{user.user_id}/{said.key}: changed before stated")
                    if isinstance(said, Change):
                        expects.append(said.expect)
                elif said.kind == "card" and not luhn_ok(said.secret):
                    found.append(f"{user.user_id}: {said.kind} fails Luhn")
        for stale in stale_values(user):
            for said in statements([user]):
                texts = [said.said, said.ask] if isinstance(said, Fact) else [said.said]
                if (isinstance(said, Fact | Change) and said.expect != stale
                        and any(stale.lower() in t.lower() for t in texts)):
                    found.append(f"{user.user_id}: stale {stale!r} is in {said.said!r}")
    return found


def stale_values(user: User, sessions: int | None = None) -> list[str]:
    """The values of ``user`` replaced or retracted in its first ``sessions`` sessions."""
    current: dict[str, str] = {}
    stale: list[str] = []
    for session in user.sessions[:sessions]:
        for said in session:
            if isinstance(said, Fact):
                current[said.key] = said.expect
            elif isinstance(said, Change | Retract) and said.key in current:
                stale.append(current[said.key])
                if isinstance(said, Change):
                    current[said.key] = said.expect
                else:
                    del current[said.key]
    return stale


def current_facts(user: User, sessions: int) -> dict[str, str]:
    """key → the expected current value after the first ``sessions`` sessions."""
    current: dict[str, str] = {}
    for session in user.sessions[:sessions]:
        for said in session:
            if isinstance(said, Fact | Change):
                current[said.key] = said.expect
            elif isinstance(said, Retract):
                current.pop(said.key, None)
    return current


def questions(user: User) -> dict[str, str]:
    return {s.key: s.ask for session in user.sessions for s in session if isinstance(s, Fact)}
