"""Deterministic synthetic facts for the speed bench: people, teams and projects with attributes.

Every fact has a distinct (entity, key) pair, so a later write with the same pair and another
value is an update (the rule classifier supersedes the old one). Sentences vary in template,
length and vocabulary so that FTS5 and the embedder see realistic text, not one repeated line.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from graphmem.timewords import MONTHS

FIRST: Final = (
    "Alice",
    "Bruno",
    "Chen",
    "Dana",
    "Emil",
    "Farah",
    "Goran",
    "Hana",
    "Ivan",
    "Julia",
    "Kenji",
    "Lena",
    "Marco",
    "Nadia",
    "Omar",
    "Petra",
    "Quinn",
    "Rosa",
    "Sami",
    "Tara",
    "Umar",
    "Vera",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zoe",
    "Anders",
    "Bea",
    "Carlos",
    "Dmitri",
    "Elena",
    "Felix",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Kira",
    "Luca",
    "Maya",
    "Nils",
    "Olga",
    "Pablo",
    "Rania",
    "Sven",
    "Tomas",
    "Uma",
    "Viktor",
    "Wanda",
    "Yara",
    "Zane",
    "Aiko",
    "Boris",
    "Clara",
    "Diego",
    "Esra",
    "Femi",
    "Gil",
    "Hiro",
    "Iris",
    "Jae",
)
LAST: Final = (
    "Novak",
    "Okafor",
    "Lindqvist",
    "Tanaka",
    "Moreau",
    "Silva",
    "Kowalski",
    "Haddad",
    "Fischer",
    "Rossi",
    "Nguyen",
    "Petrov",
    "Garcia",
    "Jensen",
    "Mbeki",
    "Costa",
    "Schmidt",
    "Ahmed",
    "Larsen",
    "Yilmaz",
    "Dubois",
    "Ivanova",
    "Kim",
    "Oliveira",
    "Berg",
    "Romano",
    "Sato",
    "Weber",
    "Ali",
    "Horvat",
    "Nowak",
    "Eriksen",
    "Marino",
    "Park",
    "Santos",
    "Keller",
    "Popescu",
    "Varga",
    "Lopez",
    "Meyer",
    "Bianchi",
    "Wong",
    "Hansen",
    "Diaz",
    "Suzuki",
    "Kaya",
    "Laurent",
    "Vogel",
    "Reyes",
    "Mori",
)
PROJECTS: Final = (
    "Atlas",
    "Beacon",
    "Cobalt",
    "Delta",
    "Ember",
    "Falcon",
    "Granite",
    "Harbor",
    "Indigo",
    "Juniper",
    "Kestrel",
    "Lumen",
    "Mosaic",
    "Nimbus",
    "Orchid",
    "Pioneer",
    "Quartz",
    "Raven",
    "Sierra",
    "Tundra",
    "Umbra",
    "Vortex",
    "Willow",
    "Zephyr",
)
PROJECT_KINDS: Final = (
    "migration",
    "dashboard",
    "pipeline",
    "rollout",
    "audit",
    "redesign",
    "service",
    "pilot",
    "integration",
    "cleanup",
)
CITIES: Final = (
    "Berlin",
    "Paris",
    "Lisbon",
    "Madrid",
    "Oslo",
    "Vienna",
    "Prague",
    "Warsaw",
    "Dublin",
    "Zurich",
    "Tokyo",
    "Seoul",
    "Nairobi",
    "Lagos",
    "Toronto",
    "Boston",
    "Austin",
    "Denver",
    "Lima",
    "Bogota",
    "Sydney",
    "Auckland",
    "Mumbai",
    "Istanbul",
    "Athens",
    "Helsinki",
)
COMPANIES: Final = (
    "Acme Corp",
    "Globex",
    "Initech",
    "Umbrella Labs",
    "Stark Industries",
    "Wayne Enterprises",
    "Hooli",
    "Vandelay Imports",
    "Soylent",
    "Tyrell Systems",
    "Cyberdyne",
    "Wonka Foods",
    "Aperture Science",
    "Monarch Solutions",
)
FOODS: Final = (
    "ramen",
    "sushi",
    "tacos",
    "paella",
    "dumplings",
    "falafel",
    "pizza",
    "pho",
    "curry",
    "pierogi",
    "risotto",
    "kimchi stew",
    "shakshuka",
    "goulash",
)
LANGUAGES: Final = (
    "Python",
    "Rust",
    "Go",
    "TypeScript",
    "Kotlin",
    "Java",
    "C++",
    "Elixir",
    "Haskell",
    "Swift",
    "Scala",
    "Ruby",
    "Julia",
    "Zig",
)
EDITORS: Final = ("Neovim", "VS Code", "Emacs", "IntelliJ", "Helix", "Sublime Text", "Zed")
HOBBIES: Final = (
    "bouldering",
    "sourdough baking",
    "chess",
    "trail running",
    "pottery",
    "birdwatching",
    "sailing",
    "woodworking",
    "salsa dancing",
    "astrophotography",
    "cycling",
    "gardening",
    "knitting",
    "kayaking",
)
ROLES: Final = (
    "staff engineer",
    "product manager",
    "data scientist",
    "SRE",
    "designer",
    "engineering manager",
    "security lead",
    "QA analyst",
    "researcher",
)
TEAMS: Final = (
    "payments",
    "search",
    "infrastructure",
    "mobile",
    "growth",
    "billing",
    "identity",
    "platform",
    "analytics",
    "support tooling",
)
DAYS: Final = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
PETS: Final = ("a beagle", "two cats", "a parrot", "a corgi", "a rescue greyhound", "goldfish")
DRINKS: Final = ("oat milk latte", "green tea", "espresso", "cold brew", "chai", "sparkling water")
STATUSES: Final = (
    "on track",
    "blocked on review",
    "at risk",
    "paused",
    "in testing",
    "waiting for budget approval",
    "ahead of schedule",
)
DATABASES: Final = ("PostgreSQL", "SQLite", "MySQL", "Cassandra", "Redis", "DynamoDB", "ClickHouse")
CLOUDS: Final = ("AWS", "GCP", "Azure", "Hetzner", "on-prem racks", "Fly.io")

#: Person attribute → (value pool, sentence templates). {e} entity, {v} value.
PERSON_KEYS: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "city": (
        tuple(CITIES),
        ("{e} lives in {v}.", "{e} moved to {v} last spring.", "These days {e} is based in {v}."),
    ),
    "employer": (
        COMPANIES,
        ("{e} works at {v}.", "{e} joined {v} after a long job search.", "{e} is employed by {v}."),
    ),
    "role": (ROLES, ("{e} works as a {v}.", "{e}'s current title is {v}.")),
    "team": (TEAMS, ("{e} is on the {v} team.", "{e} moved over to the {v} team.")),
    "favorite_food": (
        FOODS,
        (
            "{e}'s favourite food is {v}.",
            "{e} could eat {v} every day.",
            "If you take {e} to dinner, order {v}.",
        ),
    ),
    "language": (
        LANGUAGES,
        (
            "{e} prefers {v} for new projects.",
            "{e} mostly writes {v}.",
            "{e} argues that {v} is the best language for backend work.",
        ),
    ),
    "editor": (EDITORS, ("{e} uses {v} as their editor.", "{e} switched editors to {v}.")),
    "hobby": (
        HOBBIES,
        (
            "{e} spends weekends on {v}.",
            "{e} has recently taken up {v}.",
            "Outside work, {e} is into {v}.",
        ),
    ),
    "pet": (PETS, ("{e} has {v} at home.", "{e} adopted {v} recently.")),
    "drink": (DRINKS, ("{e} always orders {v} in the morning.", "{e}'s usual drink is {v}.")),
    "office_day": (DAYS, ("{e} comes to the office on {v}.", "{e} is in the office every {v}.")),
    "manager": (
        tuple(f"{f} {la}" for f in FIRST[:12] for la in LAST[:6]),
        ("{e} reports to {v}.", "{e}'s manager is {v}."),
    ),
    "birthday_month": (
        MONTHS,
        ("{e}'s birthday is in {v}.", "{e} celebrates their birthday in {v}."),
    ),
    "timezone": (
        ("UTC", "CET", "EST", "PST", "JST", "IST", "AEST"),
        ("{e} works in the {v} timezone.", "{e} keeps {v} hours."),
    ),
}
PROJECT_KEYS: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "status": (STATUSES, ("{e} is {v}.", "Status update: {e} is {v}.")),
    "owner": (
        tuple(f"{f} {la}" for f in FIRST[12:30] for la in LAST[6:14]),
        ("{e} is owned by {v}.", "{v} leads {e}."),
    ),
    "database": (DATABASES, ("{e} stores its data in {v}.", "{e} was built on {v}.")),
    "cloud": (CLOUDS, ("{e} runs on {v}.", "{e} is deployed to {v}.")),
    "deadline": (
        tuple(
            f"{m} {d}"
            for m in ("March", "June", "September", "December")
            for d in (1, 10, 15, 20, 30)
        ),
        ("{e} is due on {v}.", "The deadline for {e} is {v}."),
    ),
    "budget": (
        tuple(f"${n}k" for n in range(20, 400, 15)),
        ("{e} has a budget of {v}.", "Finance approved {v} for {e}."),
    ),
    "language": (LANGUAGES, ("{e} is written in {v}.", "The {e} codebase is mostly {v}.")),
}
EXTRAS: Final = (
    "",
    "",
    "",
    " This came up in the weekly sync.",
    " Confirmed in Slack.",
    " Mentioned during the offsite.",
    " Noted in the quarterly review.",
    " According to the onboarding doc.",
    " Someone brought it up at lunch.",
)
#: Original facts start between these dates; updates after the end (see ``updates``).
START: Final = datetime(2020, 1, 1, tzinfo=UTC).timestamp()
END: Final = datetime(2023, 12, 31, tzinfo=UTC).timestamp()
UPDATE_START: Final = datetime(2024, 1, 1, tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class Pair:
    entity: str
    key: str
    keys: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]


def pairs(n: int, seed: int = 7) -> list[Pair]:
    """``n`` distinct (entity, key) pairs in a deterministic shuffled order."""
    people = [f"{f} {m}{la}" for m in ("", "B. ", "J. ", "M. ") for la in LAST for f in FIRST]
    projects = [f"Project {p} {k}" for p in PROJECTS for k in PROJECT_KINDS]  # 240
    projects += [
        f"{p} {k} for the {t} team" for p in PROJECTS for k in PROJECT_KINDS for t in TEAMS
    ]
    every = [Pair(e, k, PERSON_KEYS) for e in people for k in PERSON_KEYS]
    every += [Pair(e, k, PROJECT_KEYS) for e in projects for k in PROJECT_KEYS]
    if n > len(every):
        raise ValueError(f"at most {len(every)} synthetic facts, asked for {n}")
    random.Random(seed).shuffle(every)
    return every[:n]


def facts(chosen: list[Pair], seed: int = 11) -> Iterator[dict[str, Any]]:
    """One fact per pair: text, entity, key, value, and a source date in 2020-2023."""
    rng = random.Random(seed)
    for p in chosen:
        values, templates = p.keys[p.key]
        value = rng.choice(values)
        yield _fact(rng, p, value, templates, rng.uniform(START, END))


def updates(chosen: list[Pair], old_values: list[str], seed: int = 13) -> Iterator[dict[str, Any]]:
    """A new value for each pair (not its old one), dated 2024 or later."""
    rng = random.Random(seed)
    for p, old in zip(chosen, old_values, strict=True):
        values, templates = p.keys[p.key]
        value = rng.choice([v for v in values if v != old])
        yield _fact(rng, p, value, templates, rng.uniform(UPDATE_START, UPDATE_START + 3e7))


#: A question about an entity, per key; its answer is the fact of that entity and key.
ASKS: Final = {
    "city": "Where does {e} live?",
    "employer": "Which company does {e} work for?",
    "role": "What is {e}'s job title?",
    "team": "Which team is {e} on?",
    "favorite_food": "What food does {e} like?",
    "language": "What language does {e} use?",
    "editor": "Which editor does {e} use?",
    "hobby": "What does {e} do on weekends?",
    "pet": "Does {e} have pets?",
    "drink": "What does {e} drink in the morning?",
    "office_day": "When is {e} in the office?",
    "manager": "Who is {e}'s manager?",
    "birthday_month": "When is {e}'s birthday?",
    "timezone": "What timezone is {e} in?",
    "status": "What is the status of {e}?",
    "owner": "Who owns {e}?",
    "database": "Which database does {e} use?",
    "cloud": "Where is {e} deployed?",
    "deadline": "When is {e} due?",
    "budget": "How much budget does {e} have?",
}


def queries(chosen: list[Pair], n: int, seed: int = 17) -> list[str]:
    """Natural questions about the stored entities (mostly) and topics."""
    rng = random.Random(seed)
    topics = [
        "who lives in {c}",
        "people who like {f}",
        "projects running on {d}",
        "who works at {co}",
        "anyone into {h}?",
    ]
    out = []
    for _ in range(n):
        if rng.random() < 0.8:
            p = rng.choice(chosen)
            out.append(ASKS[p.key].format(e=p.entity))
        else:
            out.append(
                rng.choice(topics).format(
                    c=rng.choice(CITIES),
                    f=rng.choice(FOODS),
                    d=rng.choice(DATABASES),
                    co=rng.choice(COMPANIES),
                    h=rng.choice(HOBBIES),
                )
            )
    return out


def questions(chosen: list[Pair], n: int, seed: int = 23) -> list[tuple[str, Pair]]:
    """Questions about ``n`` random stored pairs, each with the pair that answers it."""
    rng = random.Random(seed)
    picked = [rng.choice(chosen) for _ in range(n)]
    return [(ASKS[p.key].format(e=p.entity), p) for p in picked]


def _fact(
    rng: random.Random, p: Pair, value: str, templates: tuple[str, ...], when: float
) -> dict[str, Any]:
    text = rng.choice(templates).format(e=p.entity, v=value) + rng.choice(EXTRAS)
    return {
        "text": text,
        "entity": p.entity,
        "key": p.key,
        "value": value,
        "source_date": when,
        "valid_from": when,
    }
