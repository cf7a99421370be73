"""Facts about people nobody has heard of: a corpus and a question set the model cannot know.

A question about a famous river or a world cup can be answered from the model's memory,
so a right answer says little about retrieval or reading. Here every person, village,
island, club and workshop is invented from syllables and hand-written lists, and the
prose says the same kind of fact in many ways: a list of children may be "Her children
are A, B and C.", "She has raised two sons, A and B, and a daughter, C." or a bullet list
under "Family". A person's page also names the children of a brother or sister, so a
reader who skims counts the wrong family.

The questions ask for counts (children, friends, siblings, landmarks, members), relations
(a spouse, the only sister, the friend with a given trade), plain attributes (a birth
year, a river, a mayor), one item of a list (the instrument someone plays) and, answerable
false, facts that are never written: each person or place leaves at most one kind of fact
out of its page (a birth year, a pet, a population...) that other pages do state for
others, and a few questions ask about people who do not exist but share a surname with
someone who does.

    python -m benchmarks.fictional_people OUT_DIR [--seed N]

writes ``OUT_DIR/docs/*.md`` and ``OUT_DIR/questions.jsonl`` (the ``rag eval`` format, with
``kind`` and, where it helps a check, ``subject``, ``attribute`` and ``items``). The same
seed gives byte-identical files; only ``random.Random(seed)`` draws.

This module is long because most of it is hand-written text rather than logic: the word
lists and the several wordings of every fact and question that the generator draws from.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

# fmt: off
# -- hand-written lists --------------------------------------------------------------------
PLACES = [  # (name, kind, how questions refer to it)
    ("Aldmere", "village", "Aldmere"),
    ("Orrowick", "village", "Orrowick"),
    ("Fennick Cross", "village", "Fennick Cross"),
    ("Saltreth", "fishing village", "Saltreth"),
    ("Brindlecombe", "market town", "Brindlecombe"),
    ("Tarnwell", "hamlet", "Tarnwell"),
    ("Quillhaven", "village", "Quillhaven"),
    ("Isle of Vesk", "island", "the Isle of Vesk"),
]
ELSEWHERE = ["Dunmoss", "Haverleigh", "Carrowgate"]  # birthplaces without a page
REF = {name: ref for name, _, ref in PLACES}
RIVERS = ["Brume", "Ossel", "Varrow", "Tillet", "Skelder", "Wyndle", "Corran", "Emmet"]
LANDMARK_A = ["Copper", "Crooked", "Widow's", "Lantern", "Hollow", "Grey", "Salt", "Miller's",
              "Bellringer's", "Tinker's", "Sunken", "Gannet", "Weeping", "Seven Oaks", "Cinder"]
LANDMARK_B = ["Bridge", "Well", "Tower", "Barn", "Chapel", "Stones", "Gate", "Steps", "Oak",
              "Granary", "Lighthouse", "Cross", "Pound", "Ferry House", "Hall"]
PRODUCTS = ["smoked eel", "blue cheese", "willow baskets", "plum brandy", "hand-dipped candles",
            "rope", "honey cake", "pickled samphire", "oyster stew"]
FESTIVALS = ["Lantern Fair", "Eel Supper", "Hay Race", "Bonfire Walk", "Apple Wake", "Net Day",
             "Mummers' Night", "Cheese Roll"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
MONTHS = ["March", "April", "May", "June", "August", "September", "October"]

# occupation -> the place it is done (workplaces are "the NOUN in TOWN")
OCCUPATIONS = {
    "clockmaker": "clock shop",
    "bookbinder": "bindery",
    "glassblower": "glassworks",
    "cooper": "cooperage",
    "beekeeper": "apiary",
    "ferry pilot": "ferry landing",
    "schoolteacher": "village school",
    "cartographer": "survey office",
    "midwife": "cottage hospital",
    "lock keeper": "lock house",
    "weaver": "weaving shed",
    "potter": "pottery",
    "archivist": "parish archive",
    "cheesemaker": "dairy",
    "boatwright": "boatyard",
    "apothecary": "dispensary",
    "saddler": "saddlery",
    "organ builder": "organ works",
    "chandler": "chandlery",
    "stonemason": "stone yard",
    "thatcher": "reed yard",
    "tanner": "tannery",
    "farrier": "forge",
    "dyer": "dye works",
    "net mender": "net loft",
    "piano tuner": "music shop",
    "printer": "print shop",
    "bellfounder": "bell foundry",
    "luthier": "fiddle shop",
    "cobbler": "shoe shop",
    "rope maker": "ropewalk",
    "sailmaker": "sail loft",
    "signwriter": "paint shop",
    "surveyor": "land office",
    "shepherd": "hill farm",
    "glazier": "glass shop",
    "locksmith": "key shop",
    "librarian": "lending library",
}
# trades at the shared workshop
CRAFTS = ["clockmaker", "bookbinder", "glassblower", "potter", "luthier", "signwriter", "cobbler",
          "locksmith", "weaver", "saddler"]
INSTRUMENTS = ["accordion", "fiddle", "cello", "bassoon", "hurdy-gurdy", "concertina", "oboe",
               "harp", "clarinet", "mandolin", "banjo", "trombone", "dulcimer", "bagpipes"]
LANGUAGES = ["Portuguese", "Welsh", "Finnish", "Icelandic", "Basque", "Greek", "Esperanto"]
HOBBIES = ["gardening", "fly fishing", "chess", "baking rye bread", "walking the coast path",
           "pressing flowers", "kite flying", "collecting old maps", "sea swimming",
           "carving spoons", "bird-watching", "rowing", "crossword puzzles", "growing tomatoes",
           "photography", "knitting", "stargazing", "dancing the reel", "making jam", "cycling",
           "bowls"]
PET_SPECIES = ["dog", "cat", "parrot", "goat", "tortoise", "pony", "ferret", "rabbit", "canary",
               "donkey"]
PET_NAMES = ["Pipkin", "Bramble", "Nutmeg", "Sorrel", "Biscuit", "Juniper", "Pickle", "Thimble",
             "Sprout", "Clover", "Tansy", "Ember", "Fudge", "Wicket", "Puddle", "Mossy", "Barley",
             "Figgis", "Button", "Quince", "Rumble", "Tuppence", "Waffle", "Hazel"]
TRAITS = ["booming laugh", "tidy front garden", "bright red bicycle", "habit of whistling",
          "enormous umbrella", "patience with children", "terrible puns", "green coat",
          "early-morning walks", "generous suppers"]
PLACE_FILLER = ["Most houses are built of grey stone, and the lanes are too narrow for a bus.",
                "In a hard winter the road in can be shut by snow for days at a time.",
                "A footpath climbs from the square to a viewpoint over the whole parish.",
                "The old school is now a reading room, open in the afternoons.",
                "Sheep graze right up to the churchyard wall.",
                "Fog comes in from the sea on most autumn mornings and burns off by noon.",
                "The bakery opens at six and has usually sold out by nine."]
CLUB = "Heron Lantern Club"
WORKSHOP = "Tallow Lane Workshop"

# -- name parts ------------------------------------------------------------------------------
ONSETS = ["B", "Br", "D", "Dr", "F", "G", "Gr", "H", "J", "K", "L", "M", "N", "P", "R", "S", "T",
          "Th", "V", "W", "Y", "Z", "El", "Is", "Or", "Al"]
VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o"]
MIDDLES = ["l", "n", "r", "m", "v", "s", "d", "th", "nd", "rr", "ll", "rn", "sk", "lv", "st", "ld",
           "nn", "b", "g"]
ENDS = {
    "f": ["a", "ine", "elle", "ia", "wen", "ette", "ra", "ys", "is", "ora", "ika"],
    "m": ["o", "an", "ric", "as", "ek", "in", "us", "ald", "or", "ard", "em"],
}
SUR_A = ["Brenn", "Tolv", "Quess", "Fenw", "Hask", "Orm", "Vell", "Drav", "Lumm", "Sarr", "Pell",
         "Wend", "Thal", "Griss", "Morr", "Yarr", "Ebb", "Ost", "Harr", "Niv", "Coll", "Rook",
         "Hobb", "Marr", "Pinn", "Skell", "Trem", "Ulv", "Bask", "Carr", "Dowl", "Fald"]
SUR_B = ["ick", "ane", "el", "wright", "eld", "by", "ow", "ard", "stead", "holt", "gard", "ley",
         "ton", "worth", "ock", "ett", "iss", "ander", "combe"]

# real words and well-known names the syllables happen to spell
NOT_NAMES = ["Honda", "Lorem", "Moselle", "Honor", "Linda", "Brenda", "Dora", "Nora", "Tara",
             "Sara", "Vera", "Rosa", "Lola", "Bella", "Stella", "Tina", "Dana", "Lena", "Nina"]
NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
PRONOUNS = {"f": ("she", "her", "her"), "m": ("he", "him", "his")}  # subject, object, possessive
MIN_WORDS, MAX_WORDS = 80, 250
N_PEOPLE = 30
OMIT_PERSON = {"birth_year": 3, "pet": 3, "occupation": 2, "moved_to": 2, "spouse": 2}
OMIT_PLACE = {"population": 2, "mayor": 1, "founded": 1, "river": 1}
# fmt: on


# -- the world ---------------------------------------------------------------------------------
@dataclass
class Kin:
    """Someone named on a page without a page of their own (a child, a sibling, a mayor)."""

    first: str
    last: str
    gender: str

    @property
    def full(self) -> str:
        return f"{self.first} {self.last}"


@dataclass
class Person(Kin):
    slug: str = ""
    born: int = 0
    birthplace: str = ""
    occupation: str | None = None
    workplace: str | None = None
    home: str = ""  # where they live and work now
    moved: int | None = None  # the year they moved to ``home`` (None: not written)
    spouse: Kin | None = None
    married: int = 0
    children: list[Kin] = field(default_factory=list)
    siblings: list[Kin] = field(default_factory=list)
    nephews: list[Kin] = field(default_factory=list)  # the children of siblings[0]
    friends: list[Kin] = field(default_factory=list)
    friend_job: Person | None = None  # the one friend whose trade the page names
    hobbies: list[str] = field(default_factory=list)
    instrument: str | None = None
    language: str | None = None
    pets: list[tuple[str, str]] = field(default_factory=list)
    trait: str = ""
    omit: str | None = None


@dataclass
class Place:
    name: str
    kind: str
    ref: str
    slug: str
    founded: int
    river: str
    population: int
    mayor: Kin
    mayor_since: int
    landmarks: list[str]
    product: str
    festival: str
    month: str
    market_day: str
    omit: str | None = None


@dataclass
class Society:
    """The club or the shared workshop: a founding year, a head and a complete list of members."""

    name: str
    slug: str
    town: str
    founded: int
    head: Kin
    members: list[Kin]  # club: founding members; workshop: bench holders
    trades: dict[str, str] = field(default_factory=dict)  # workshop: full name -> trade
    weekday: str = ""


@dataclass
class World:
    people: list[Person]
    places: list[Place]
    club: Society
    workshop: Society
    ghosts: list[Kin]  # people who do not exist, with a surname of the corpus


class Names:
    """Invented first names and surnames; none is part of another, none is in ``banned``."""

    def __init__(self, rng: random.Random, banned: list[str], reserved: list[str]):
        self.rng = rng
        self.banned = {b.lower() for b in banned}
        self.taken = [r.lower() for r in reserved]

    def _free(self, name: str, first: bool) -> bool:
        low = name.lower()
        if len(low) < 4 or low in self.banned:
            return False
        if first and re.search(r"[^aeiouy]{3}|(..).*\1", low):
            return False  # hard to say ('Endrric'), or a stutter ('Alallek')
        return not any(low in t or t in low for t in self.taken)

    def _claim(self, make, first: bool = False) -> str:
        for _ in range(5000):
            name = make()
            if self._free(name, first):
                self.taken.append(name.lower())
                return name
        raise RuntimeError("ran out of invented names")

    def first(self, gender: str) -> str:
        r = self.rng
        return self._claim(
            lambda: (
                r.choice(ONSETS) + r.choice(VOWELS) + r.choice(MIDDLES) + r.choice(ENDS[gender])
            ),
            first=True,
        )

    def surname(self) -> str:
        return self._claim(
            lambda: re.sub(r"(.)\1\1", r"\1\1", self.rng.choice(SUR_A) + self.rng.choice(SUR_B))
        )

    def kin(self, last: str, gender: str | None = None) -> Kin:
        g = gender or self.rng.choice("fm")
        return Kin(self.first(g), last, g)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _build(rng: random.Random, banned: list[str]) -> World:
    reserved = [p[0] for p in PLACES] + ELSEWHERE + RIVERS + PET_NAMES + [CLUB, WORKSHOP]
    reserved = [w for name in reserved for w in name.replace("'", " ").split() if len(w) > 3]
    names = Names(rng, banned + NOT_NAMES, reserved)

    # places
    rivers = rng.sample(RIVERS, len(PLACES))
    pairs = [(a, b) for a in LANDMARK_A for b in LANDMARK_B]
    rng.shuffle(pairs)
    places = []
    products, festivals = rng.sample(PRODUCTS, len(PLACES)), rng.sample(FESTIVALS, len(PLACES))
    for (name, kind, ref), river in zip(PLACES, rivers, strict=True):
        marks = [f"{a} {b}" for a, b in (pairs.pop() for _ in range(rng.randint(2, 5)))]
        founded = rng.randint(1150, 1890)
        places.append(
            Place(
                name, kind, ref, _slug(name), founded, river, rng.randint(120, 980),
                names.kin(names.surname()), rng.randint(1995, 2022), marks,
                products.pop(), festivals.pop(), rng.choice(MONTHS),
                rng.choice(WEEKDAYS),
            )
        )  # fmt: skip
    # every count from 2 to 5 among the landmarks, so the questions can ask each
    for p, n in zip(places, [2, 3, 4, 5], strict=False):
        while len(p.landmarks) > n:
            p.landmarks.pop()
        while len(p.landmarks) < n:
            a, b = pairs.pop()
            p.landmarks.append(f"{a} {b}")
    kinds = [k for k, n in OMIT_PLACE.items() for _ in range(n)]
    for p, k in zip(rng.sample(places, len(kinds)), kinds, strict=True):
        p.omit = k

    # people
    children = [0, 0, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5]
    children += [rng.randint(0, 5) for _ in range(N_PEOPLE - len(children))]
    rng.shuffle(children)
    occupations = rng.sample(sorted(OCCUPATIONS), N_PEOPLE)
    town_names = [p.name for p in places]
    people: list[Person] = []
    for i in range(N_PEOPLE):
        g = rng.choice("fm")
        last = names.surname()
        p = Person(names.first(g), last, g)
        p.slug = _slug(p.full)
        p.born = rng.randint(1931, 1994)
        p.birthplace = rng.choice(town_names + ELSEWHERE)
        p.home = rng.choice([t for t in town_names if t != p.birthplace])
        p.moved = rng.randint(p.born + 18, min(p.born + 45, 2021))
        p.occupation = occupations[i]
        p.workplace = f"the {OCCUPATIONS[p.occupation]} {_in(p.home)}"
        p.spouse = names.kin(names.surname(), "m" if g == "f" else "f")
        p.married = rng.randint(p.born + 20, min(p.born + 40, 2022))
        p.children = [names.kin(last) for _ in range(children[i])]
        p.siblings = [names.kin(last) for _ in range(rng.choice([1, 1, 2, 2, 3]))]
        n_nephews = rng.choice([n for n in range(1, 6) if n != children[i]])
        p.nephews = [names.kin(last) for _ in range(n_nephews)]
        hobbies = rng.sample(HOBBIES, rng.randint(1, 3))
        if rng.random() < 0.6:
            p.instrument = rng.choice(INSTRUMENTS)
            hobbies.insert(rng.randint(0, len(hobbies)), f"playing the {p.instrument}")
        if rng.random() < 0.3 or len(hobbies) < 2:
            p.language = rng.choice(LANGUAGES)
            hobbies.insert(rng.randint(0, len(hobbies)), f"learning {p.language}")
        p.hobbies = hobbies
        species = rng.sample(PET_SPECIES, rng.choice([1, 1, 2]))
        p.pets = [(s, rng.choice(PET_NAMES)) for s in species]
        if len(p.pets) == 2 and p.pets[0][1] == p.pets[1][1]:
            p.pets.pop()
        p.trait = rng.choice(TRAITS)
        people.append(p)

    kinds = [k for k, n in OMIT_PERSON.items() for _ in range(n)]
    for p, k in zip(rng.sample(people, len(kinds)), kinds, strict=True):
        p.omit = k
        if k == "pet":
            p.pets = []
        elif k == "occupation":
            p.occupation = p.workplace = None
        elif k == "moved_to":  # and works where born: no page hints at a move
            p.moved = None
            p.home = p.birthplace
            if p.occupation:
                p.workplace = f"the {OCCUPATIONS[p.occupation]} {_in(p.home)}"
        elif k == "spouse":
            p.spouse = None

    # friends: one to three people with a page, the rest without
    friend_counts = [2, 3, 4, 5] * 8
    rng.shuffle(friend_counts)
    for p, n in zip(people, friend_counts, strict=False):
        known = rng.sample([q for q in people if q is not p], rng.randint(1, min(3, n)))
        others = [names.kin(names.surname()) for _ in range(n - len(known))]
        p.friends = known + others
        rng.shuffle(p.friends)
        with_trade = [q for q in known if q.occupation]
        if with_trade and p.occupation and rng.random() < 0.5:
            p.friend_job = rng.choice(with_trade)

    # the shared workshop: some craftspeople with a page, some without
    town = rng.choice(town_names)
    crafty = [p for p in people if p.occupation in CRAFTS and p.moved and p.birthplace != town]
    bench = rng.sample(crafty, min(len(crafty), rng.randint(1, 2)))
    spare = [c for c in CRAFTS if c not in {p.occupation for p in people}]
    for p in bench:
        p.home = town
        p.workplace = f"the {WORKSHOP} {_in(town)}"
    holders: list[Kin] = list(bench)
    trades = {p.full: p.occupation or "" for p in bench}
    for trade in rng.sample(spare, min(len(spare), rng.randint(3, 5) - len(bench))):
        k = names.kin(names.surname())
        holders.append(k)
        trades[k.full] = trade
    rng.shuffle(holders)
    workshop = Society(
        WORKSHOP, _slug(WORKSHOP), town, rng.randint(1968, 2015), names.kin(names.surname()),
        holders, trades,
    )  # fmt: skip
    members = [names.kin(names.surname()) for _ in range(rng.randint(3, 5))]
    club = Society(
        CLUB, _slug(CLUB), rng.choice(town_names), rng.randint(1890, 1960),
        names.kin(names.surname()), members, weekday=rng.choice(WEEKDAYS),
    )  # fmt: skip
    ghosts = [names.kin(p.last) for p in rng.sample(people, 3)]
    return World(people, places, club, workshop, ghosts)


# -- prose -------------------------------------------------------------------------------------
def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _in(place: str) -> str:
    """'in Aldmere', 'on the Isle of Vesk'."""
    return f"on {REF[place]}" if REF.get(place, "").startswith("the Isle") else f"in {place}"


def _ref(place: str) -> str:
    return REF.get(place, place)


def _a(word: str) -> str:
    return ("an " if word[0].lower() in "aeiou" else "a ") + word


def _num(n: int) -> str:
    return NUMBER_WORDS[n]


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


def _groups(people: list[Kin], female: str, male: str) -> str:
    """'two sons, A and B, and a daughter, C'."""
    parts = []
    for g, word in (("m", male), ("f", female)):
        names = [
            k.full if word in ("brother", "sister") else k.first for k in people if k.gender == g
        ]
        if len(names) == 1:
            parts.append(f"{_a(word)}, {names[0]}")
        elif names:
            parts.append(f"{_num(len(names))} {word}s, {_and(names)}")
    if len(parts) == 2 and people[0].gender == "f":
        parts.reverse()
    return ", and ".join(parts)


def words(text: str) -> int:
    return len(re.findall(r"[A-Za-z0-9]+(?:['-][A-Za-z0-9]+)*", text))


class Page:
    """A person's page: the facts fixed, the wording drawn."""

    def __init__(self, p: Person, rng: random.Random):
        self.p, self.rng = p, rng
        self.s, self.o, self.pos = PRONOUNS[p.gender]

    def who(self) -> str:
        """A later mention: the first name or a pronoun."""
        return self.p.first if self.rng.random() < 0.5 else _cap(self.s)

    def pick(self, options: list[str]) -> str:
        return self.rng.choice(options)

    def opening(self) -> str:
        p, s, pos = self.p, self.s, self.pos
        place = _in(p.birthplace)
        if p.omit == "birth_year":
            born = [
                f"{{S}} was born {place}.",
                f"{{S}} was born and raised {place}.",
                f"{{S}} came into the world {place}.",
            ]
        else:
            born = [
                f"{{S}} was born {place} in {p.born}.",
                f"{{S}} was born in {p.born} {place}.",
                f"{{S}} came into the world {place} in {p.born}.",
            ]
        born_s = self.pick(born)
        if not p.occupation:
            return born_s.replace("{S}", p.full)
        job = _a(p.occupation)
        work = self.pick(
            [
                f"{{S}} works as {job} at {p.workplace}.",
                f"{{S}} is {job} by trade and works at {p.workplace}.",
                f"{{S}} earns {pos} living as {job} at {p.workplace}.",
                f"Most days {{s}} can be found at {p.workplace}, where {s} works as {job}.",
            ]
        )
        if self.rng.random() < 0.5:
            return born_s.replace("{S}", p.full) + " " + self._later(work)
        return work.replace("{S}", p.full).replace("{s}", p.full) + " " + self._later(born_s)

    def _later(self, sentence: str) -> str:
        w = self.who()
        return sentence.replace("{S}", w).replace("{s}", w if w == self.p.first else self.s)

    def move(self) -> str:
        p = self.p
        if p.moved is None:
            return ""
        return self.pick(
            [
                f"In {p.moved} {self.s} moved to {_ref(p.home)}.",
                f"{p.first} settled {_in(p.home)} in {p.moved} and has lived there ever since.",
                f"{_cap(self.s)} moved to {_ref(p.home)} in {p.moved}.",
                f"Since {p.moved} {p.first} has made {self.pos} home {_in(p.home)}, having "
                f"moved there from {_ref(p.birthplace)}.",
            ]
        )

    def family(self) -> tuple[str, bool]:
        """The spouse and the children; True when it is a bullet list under a heading."""
        p, rng, pos = self.p, self.rng, self.pos
        kids, sp = p.children, p.spouse
        role = ("husband" if p.gender == "f" else "wife") if sp else ""
        if rng.random() < 0.3 and (sp or kids):
            lines = ["## Family", ""]
            if sp:
                lines.append(f"- {_cap(role)}: {sp.full}")
            if not kids:
                lines.append("- Children: none")
            elif rng.random() < 0.5:
                lines.append(f"- Children: {', '.join(k.first for k in kids)}")
            else:
                lines += [f"- {'Son' if k.gender == 'm' else 'Daughter'}: {k.first}" for k in kids]
            return "\n".join(lines), True
        out = []
        if sp:
            out.append(
                self.pick(
                    [
                        f"{_cap(self.s)} is married to {sp.full}.",
                        f"{_cap(pos)} {role} is {sp.full}; they married in {p.married}.",
                        f"In {p.married} {p.first} married {sp.full}.",
                        f"{p.first} and {pos} {role}, {sp.full}, married in {p.married}.",
                    ]
                )
            )
        n, names = len(kids), [k.first for k in kids]
        they = f"{p.first} and {sp.first}" if sp else p.first
        if n == 0:
            out.append(f"{they} have no children." if sp else f"{p.first} has no children.")
        else:
            options = [f"{_cap(self.s)} has raised {_groups(kids, 'daughter', 'son')}."]
            if n == 1:
                options += [
                    f"{_cap(pos)} only child is {names[0]}.",
                    f"{they} {'have' if sp else 'has'} one child, {names[0]}.",
                ]
            else:
                options += [
                    f"{_cap(pos)} children are {_and(names)}.",
                    f"{_and(names)} are {pos} children.",
                ]
                if sp:
                    options.append(f"Together they have {_num(n)} children: {_and(names)}.")
                if n == 2:
                    options.append(
                        f"{p.first}'s elder child is {names[0]} and the younger is {names[1]}."
                    )
                else:
                    options.append(
                        f"{p.first}'s eldest is {names[0]}, followed by {_and(names[1:-1])}; "
                        f"the youngest is {names[-1]}."
                    )
            out.append(self.pick(options))
        return " ".join(out), False

    def siblings(self) -> tuple[str, bool]:
        p, rng = self.p, self.rng
        sibs, sb, nephews = p.siblings, p.siblings[0], p.nephews
        word = "sister" if sb.gender == "f" else "brother"
        parent = "mother" if sb.gender == "f" else "father"
        names = [k.first for k in nephews]
        n = len(names)
        if rng.random() < 0.25:
            lines = ["## Siblings", ""]
            for k in sibs:
                rel = "sister" if k.gender == "f" else "brother"
                extra = f", {parent} of {_and(names)}" if k is sb else ""
                lines.append(f"- {k.full} ({rel}){extra}")
            return "\n".join(lines), True
        if len(sibs) == 1:
            first = self.pick(
                [
                    f"{p.first}'s only sibling is {self.pos} {word}, {sb.full}.",
                    f"{_cap(self.s)} has one {word}, {sb.full}.",
                    f"{p.first} grew up with {_a(word)}, {sb.full}.",
                ]
            )
        else:
            groups = _groups(sibs, "sister", "brother")
            first = self.pick(
                [f"{_cap(self.s)} has {groups}.", f"{p.first} grew up with {groups}."]
            )
        nephew = self.pick(
            [
                f"{sb.first} has {_num(n)} {'child' if n == 1 else 'children'} of "
                f"{PRONOUNS[sb.gender][2]} own: {_and(names)}.",
                f"{_cap(self.pos)} {word} {sb.first} is the {parent} of {_and(names)}.",
                f"{sb.first}'s {'child' if n == 1 else 'children'}, {_and(names)}, often "
                f"{'stays' if n == 1 else 'stay'} with {p.first} in the summer.",
            ]
        )
        return f"{first} {nephew}", False

    def friends(self) -> tuple[str, bool]:
        p, rng = self.p, self.rng
        names = [k.full for k in p.friends]
        job = ""
        if p.friend_job:
            f = p.friend_job
            job = self.pick(
                [
                    f" {f.first} works as {_a(f.occupation or '')}.",
                    f" Of these, {f.first} is {_a(f.occupation or '')} by trade.",
                    f" {f.first}, {_a(f.occupation or '')}, is the one {self.s} has known longest.",
                ]
            )
        if rng.random() < 0.2:
            text = "## Friends\n\n" + "\n".join(f"- {n}" for n in names)
            return (text + "\n\n" + job.strip()).strip(), True
        text = self.pick(
            [
                f"{_cap(self.pos)} closest friends: {_and(names)}.",
                f"{_cap(self.pos)} closest friends are {_and(names)}.",
                f"{p.first} counts {_and(names)} as {self.pos} closest friends.",
                f"{_cap(self.s)} has {_num(len(names))} close friends: {_and(names)}.",
            ]
        )
        return text + job, False

    def hobbies(self) -> tuple[str, bool]:
        hs = self.p.hobbies
        if self.rng.random() < 0.2:
            return "## Hobbies\n\n" + "\n".join(f"- {_cap(h)}" for h in hs), True
        options = [
            f"In {self.pos} spare time {self.s} enjoys {_and(hs)}.",
            f"{_cap(self.pos)} hobbies are {_and(hs)}.",
        ]
        if len(hs) > 1:
            options.append(
                f"On a free afternoon {self.p.first} likes {hs[0]}; {self.s} is also fond of "
                f"{_and(hs[1:])}."
            )
        return self.pick(options), False

    def pets(self) -> str:
        pets = self.p.pets
        if not pets:
            return ""
        if len(pets) == 1:
            ((sp, name),) = pets
            return self.pick(
                [
                    f"{_cap(self.s)} keeps {_a(sp)} called {name}.",
                    f"{_cap(self.pos)} {sp}, {name}, goes everywhere with {self.o}.",
                    f"{self.p.first}'s only pet is {_a(sp)} named {name}.",
                ]
            )
        (s1, n1), (s2, n2) = pets
        return self.pick(
            [
                f"{_cap(self.s)} keeps {_a(s1)} called {n1} and {_a(s2)} called {n2}.",
                f"{_cap(self.pos)} pets are {_a(s1)} named {n1} and {_a(s2)} named {n2}.",
            ]
        )

    def trait(self) -> str:
        return self.pick(
            [
                f"Neighbours know {self.p.first} for {self.pos} {self.p.trait}.",
                f"{_cap(_in(self.p.home))} {self.s} is known for {self.pos} {self.p.trait}.",
            ]
        )

    def render(self) -> str:
        head = f"# {self.p.full}\n\n{self.opening()}"
        move = self.move()
        if move:
            head += " " + move
        prose, lists = [], []
        for text, is_list in (self.family(), self.siblings(), self.friends(), self.hobbies()):
            (lists if is_list else prose).append(text)
        prose += [t for t in (self.pets(), self.trait()) if t]
        self.rng.shuffle(prose)
        paras = [head]
        while prose:  # two or three sentences to a paragraph
            take = self.rng.randint(1, 2)
            paras.append(" ".join(prose[:take]))
            prose = prose[take:]
        return "\n\n".join(paras + lists) + "\n"


def _fitting(write, name: str) -> str:
    """A wording of a page within MIN_WORDS..MAX_WORDS (``write`` draws a new one each call)."""
    for _ in range(50):
        text = write()
        if MIN_WORDS <= words(text) <= MAX_WORDS:
            return text
    raise RuntimeError(f"no wording of the page on {name} fits {MIN_WORDS}-{MAX_WORDS} words")


def person_page(p: Person, rng: random.Random) -> str:
    return _fitting(lambda: Page(p, rng).render(), p.full)


def place_page(pl: Place, rng: random.Random) -> str:
    return _fitting(lambda: _place_page(pl, rng), pl.name)


def _place_page(pl: Place, rng: random.Random) -> str:
    ref, name = pl.ref, pl.name
    it = _cap(ref)
    sents = []
    if pl.omit == "river":
        sents.append(
            rng.choice([f"{it} is {_a(pl.kind)} on a low hill.", f"{it} is a quiet {pl.kind}."])
        )
    else:
        sents.append(
            rng.choice(
                [
                    f"{it} is {_a(pl.kind)} {'at the mouth of' if pl.kind == 'island' else 'on'}"
                    f" the river {pl.river}.",
                    f"The river {pl.river} runs through {ref}, {_a(pl.kind)}.",
                ]
                + ([f"{it} lies on the banks of the {pl.river}."] if pl.kind != "island" else [])
            )
        )
    if pl.omit != "founded":
        sents.append(
            rng.choice(
                [
                    f"It was founded in {pl.founded}.",
                    f"The {pl.kind} was founded in {pl.founded}.",
                    f"Records say {ref} was founded in {pl.founded}.",
                ]
            )
        )
    if pl.omit != "population":
        sents.append(
            rng.choice(
                [
                    f"About {pl.population} people live there.",
                    f"It has a population of {pl.population}.",
                    f"Some {pl.population} residents call it home.",
                ]
            )
        )
    if pl.omit != "mayor":
        m = pl.mayor
        sents.append(
            rng.choice(
                [
                    f"The mayor is {m.full}.",
                    f"Since {pl.mayor_since} the mayor has been {m.full}.",
                    f"{m.full} has served as mayor since {pl.mayor_since}; {m.first} is rarely "
                    "seen without a notebook.",
                ]
            )
        )
    extra = [
        f"{it} is known for its {pl.product}.",
        f"Market day is {pl.market_day}.",
        f"Every {pl.month} the {pl.kind} holds the {pl.festival}, which draws visitors from far "
        "along the coast.",
    ]
    if pl.kind == "island":
        extra.append("A ferry crosses to the mainland twice a day, weather permitting.")
    extra += rng.sample(PLACE_FILLER, 2)
    rng.shuffle(extra)
    marks = [f"the {m}" for m in pl.landmarks]
    style = rng.randrange(4)
    lines = ""
    if style == 0:
        lines = "## Landmarks\n\n" + "\n".join(f"- {_cap(m)}" for m in marks)
    else:
        sents.append(
            [
                "",
                f"Its landmarks are {_and(marks)}.",
                f"Visitors come for {_num(len(marks))} landmarks: {_and(marks)}.",
                f"The sights worth seeing are {_and(marks)}.",
            ][style]
        )
    first = " ".join(sents[:2])
    rest = sents[2:] + extra
    text = f"# {name}\n\n{first}\n\n{' '.join(rest[:3])}\n\n{' '.join(rest[3:])}"
    return (text.rstrip() + ("\n\n" + lines if lines else "")).replace("\n\n\n", "\n\n") + "\n"


def society_page(so: Society, club: bool, rng: random.Random) -> str:
    return _fitting(lambda: _society_page(so, club, rng), so.name)


def _society_page(so: Society, club: bool, rng: random.Random) -> str:
    h = so.head
    hp = PRONOUNS[h.gender]
    if club:
        names = [m.full for m in so.members]
        sents = [
            rng.choice(
                [
                    f"The {so.name} was founded in {so.founded}. It meets in {so.town}.",
                    f"The {so.name} dates from {so.founded}. Its home is {so.town}.",
                ]
            ),
            rng.choice(
                [
                    f"It is chaired by {h.full}.",
                    f"{h.full} chairs the club; {h.first} keeps the minutes in green ink.",
                ]
            ),
            rng.choice(
                [
                    f"Its founding members were {_and(names)}.",
                    f"The club had {_num(len(names))} founding members: {_and(names)}.",
                ]
            ),
            f"Members meet on {so.weekday} evenings to row lantern-lit boats along the water "
            "and to argue about the best route home.",
            "Each winter the club paints new paper lanterns, and the old ones are hung in the "
            "windows of the houses that lent a boat that year.",
            "Visitors may watch from the jetty but are asked not to feed the herons.",
        ]
        return f"# The {so.name}\n\n{' '.join(sents[:3])}\n\n{' '.join(sents[3:])}\n"
    rows = [f"{m.full}, {_a(so.trades[m.full])}" for m in so.members]
    sents = [
        f"The {so.name} is a shared workshop in {so.town}, opened in {so.founded} by {h.full}.",
        f"{h.first} still sweeps the floor every evening and lets the benches by the month; "
        f"{hp[0]} says the light from the north windows is the best in the county.",
        "Craftspeople bring their own tools, share a kiln, a lathe and a long table, and "
        "take turns making tea.",
        "A bell over the door rings whenever someone comes in; nobody has managed to stop it.",
    ]
    if rng.random() < 0.5:
        body = f"Benches are rented by {'; '.join(rows[:-1])}; and {rows[-1]}."
        return f"# The {so.name}\n\n{' '.join(sents)}\n\n{body}\n"
    body = "## Bench holders\n\n" + "\n".join(f"- {r}" for r in rows)
    return f"# The {so.name}\n\n{' '.join(sents)}\n\n{body}\n"


# -- questions ---------------------------------------------------------------------------------
def _q(kind, question, answers, source, **extra) -> dict:
    row = {
        "question": question,
        "answers": answers,
        "answerable": bool(answers),
        "source": source,
        "kind": kind,
    }
    row.update(extra)
    return row


def _count(n: int) -> list[str]:
    return [str(n), _num(n)]


def _questions(w: World, rng: random.Random) -> list[dict]:
    pick = rng.choice
    out: list[dict] = []
    people = list(w.people)
    rng.shuffle(people)
    doc = {p.full: f"{p.slug}.md" for p in w.people}

    # counts: children (every count from 1 to 5, each with a sibling's list of another size)
    by_n: dict[int, list[Person]] = {}
    for p in people:
        by_n.setdefault(len(p.children), []).append(p)
    chosen = [by_n[n][i] for n in (1, 5, 4, 3, 2) for i in range(2) if len(by_n.get(n, [])) > i]

    def count(templates: list[str], name: str, members: list[str], source: str, **keys) -> None:
        q = pick(templates).format(name)
        out.append(_q("count", q, _count(len(members)), source, **keys, items=members))

    for p in chosen[:9]:
        count(
            [
                "How many children does {} have?",
                "How many children has {} got?",
                "What is the number of children {} has?",
            ],
            p.full,
            [k.first for k in p.children],
            doc[p.full],
            subject=p.full,
            attribute="children",
        )
    for p in people[:3]:
        count(
            [
                "How many close friends does {} have?",
                "How many people does {} count as close friends?",
            ],
            p.full,
            [k.full for k in p.friends],
            doc[p.full],
            subject=p.full,
            attribute="friends",
        )
    for p in [q for q in people[3:] if len(q.siblings) > 1][:2]:
        count(
            [
                "How many siblings does {} have?",
                "How many brothers and sisters does {} have?",
            ],
            p.full,
            [k.full for k in p.siblings],
            doc[p.full],
            subject=p.full,
            attribute="siblings",
        )
    for pl in w.places[:4]:
        count(
            [
                "How many landmarks does {} have?",
                "How many landmarks are listed for {}?",
                "What is the number of landmarks in {}?",
            ],
            pl.ref,
            list(pl.landmarks),
            f"{pl.slug}.md",
            subject=pl.name,
            attribute="landmarks",
        )
    c, ws = w.club, w.workshop
    out.append(
        _q(
            "count",
            f"How many founding members did the {c.name} have?",
            _count(len(c.members)),
            f"{c.slug}.md",
            subject=c.name,
            attribute="members",
            items=[m.full for m in c.members],
        )
    )
    out.append(
        _q(
            "count",
            f"How many craftspeople rent a bench at the {ws.name}?",
            _count(len(ws.members)),
            f"{ws.slug}.md",
            subject=ws.name,
            attribute="members",
            items=[m.full for m in ws.members],
        )
    )

    def aliases(k: Kin) -> list[str]:
        return [k.full, k.first]

    # relations
    for p in [q for q in people if q.spouse][:5]:
        role = "husband" if p.gender == "f" else "wife"
        out.append(
            _q(
                "relation",
                pick(
                    [
                        f"Who is {p.full}'s {role}?",
                        f"Who is {p.full} married to?",
                        f"What is the name of {p.full}'s {role}?",
                    ]
                ),
                aliases(p.spouse),
                doc[p.full],
                subject=p.full,
                attribute="spouse",
            )
        )
    n_sib = 0
    for p in people[5:]:
        for g, word in (("f", "sister"), ("m", "brother")):
            same = [k for k in p.siblings if k.gender == g]
            if len(same) == 1 and n_sib < 3:
                n_sib += 1
                out.append(
                    _q(
                        "relation",
                        pick(
                            [
                                f"What is the name of {p.full}'s {word}?",
                                f"Who is {p.full}'s {word}?",
                            ]
                        ),
                        aliases(same[0]),
                        doc[p.full],
                        subject=p.full,
                        attribute=word,
                    )
                )
                break
    for p in [q for q in people if q.friend_job][:2]:
        f = p.friend_job
        job = _a(f.occupation or "")
        out.append(
            _q(
                "relation",
                pick(
                    [
                        f"Which of {p.full}'s friends is {job}?",
                        f"Which friend of {p.full} works as {job}?",
                    ]
                ),
                aliases(f),
                doc[p.full],
                subject=p.full,
                attribute="friend",
            )
        )
    out.append(
        _q("relation", f"Who chairs the {c.name}?", aliases(c.head), f"{c.slug}.md",
           subject=c.name, attribute="chair")
    )  # fmt: skip

    # attributes
    def person_attr(p: Person, attr: str, answers: list[str]) -> dict:
        templates = {
            "birth_year": ["In what year was {} born?", "When was {} born?"],
            "birthplace": ["Where was {} born?", "In which place was {} born?"],
            "occupation": [
                "What does {} do for a living?",
                "What is {}'s occupation?",
                "What is {}'s trade?",
            ],
            "moved_to": ["Which town did {} move to?", "Where did {} move to?"],
            "spouse": ["Who is {} married to?"],
            "pet": ["What kind of pet does {} keep?", "What pet does {} have?"],
        }[attr]
        kind = "attribute" if answers else "unwritten"
        src = doc[p.full] if answers else None
        return _q(kind, pick(templates).format(p.full), answers, src, subject=p.full,
                  attribute=attr)  # fmt: skip

    def place_attr(pl: Place, attr: str, answers: list[str]) -> dict:
        templates = {
            "founded": ["When was {} founded?", "In what year was {} founded?"],
            "river": ["Which river runs through {}?", "On which river does {} lie?"],
            "mayor": ["Who is the mayor of {}?", "Who serves as mayor of {}?"],
            "population": ["What is the population of {}?", "How many people live in {}?"],
        }[attr]
        kind = "attribute" if answers else "unwritten"
        src = f"{pl.slug}.md" if answers else None
        return _q(kind, pick(templates).format(pl.ref), answers, src, subject=pl.name,
                  attribute=attr)  # fmt: skip

    plain = [p for p in people if not p.omit]
    rng.shuffle(plain)
    for p in plain[:3]:
        out.append(person_attr(p, "birth_year", [str(p.born)]))
    for p in plain[3:5]:
        out.append(person_attr(p, "birthplace", [p.birthplace]))
    for p in plain[5:8]:
        out.append(person_attr(p, "occupation", [p.occupation or ""]))
    for p in plain[8:10]:
        out.append(person_attr(p, "moved_to", [p.home]))
    for p in plain[10:12]:
        sp, name = p.pets[0]
        out.append(
            _q("attribute", f"What is the name of {p.full}'s {sp}?", [name], doc[p.full],
               subject=p.full, attribute="pet")
        )  # fmt: skip
    plain_places = [pl for pl in w.places if not pl.omit]
    for attr in ("founded", "river", "mayor", "population"):
        for pl in rng.sample(plain_places, 2 if attr != "population" else 1):
            value = {
                "founded": [str(pl.founded)],
                "river": [pl.river],
                "mayor": aliases(pl.mayor),
                "population": [str(pl.population)],
            }[attr]
            out.append(place_attr(pl, attr, value))

    # one item of a list
    players = [p for p in people if p.instrument]
    for p in players[:3]:
        out.append(
            _q(
                "list-member",
                pick(["Which instrument does {} play?", "What instrument does {} play?"]).format(
                    p.full
                ),
                [p.instrument or ""],
                doc[p.full],
                subject=p.full,
                attribute="instrument",
            )
        )
    for p in [q for q in people if q.language][:2]:
        out.append(
            _q("list-member", f"Which language is {p.full} learning?", [p.language or ""],
               doc[p.full], subject=p.full, attribute="language")
        )  # fmt: skip

    # never written
    for p in w.people:
        if p.omit:
            out.append(person_attr(p, p.omit, []))
    for pl in w.places:
        if pl.omit:
            out.append(place_attr(pl, pl.omit, []))
    for g in w.ghosts:
        out.append(
            _q(
                "unwritten",
                pick(
                    [
                        "Where was {} born?",
                        "What does {} do for a living?",
                        "How many children does {} have?",
                    ]
                ).format(g.full),
                [],
                None,
                subject=g.full,
                attribute="person",
            )
        )
    rng.shuffle(out)
    return [{"id": f"facts-{i:03d}", **q} for i, q in enumerate(out, 1)]


# -- the set -----------------------------------------------------------------------------------
def _render(w: World, rng: random.Random) -> dict[str, str]:
    pages = {f"{p.slug}.md": person_page(p, rng) for p in w.people}
    pages.update({f"{pl.slug}.md": place_page(pl, rng) for pl in w.places})
    pages[f"{w.club.slug}.md"] = society_page(w.club, True, rng)
    pages[f"{w.workshop.slug}.md"] = society_page(w.workshop, False, rng)
    return pages


def _clashes(w: World, pages: dict[str, str]) -> list[str]:
    """Invented names that are part of another word of the corpus ('Ilsa' in 'Ilsabet')."""
    tokens = sorted({t for text in pages.values() for t in re.findall(r"[a-z]+", text.lower())})
    names = [p.first for p in w.people] + [g.first for g in w.ghosts]
    for p in w.people:
        names += [k.first for k in [*p.children, *p.siblings, *p.nephews, *p.friends]]
        names += [p.spouse.first] if p.spouse else []
    names += [pl.mayor.first for pl in w.places]
    names += [k.first for k in [w.club.head, w.workshop.head, *w.club.members, *w.workshop.members]]
    out = []
    for name in names:
        low = name.lower()
        if any(low in t and t != low for t in tokens):
            out.append(name)
    return out


def generate(seed: int = 7) -> tuple[dict[str, str], list[dict]]:
    """The pages (file name -> Markdown) and the question rows of one seed."""
    banned: list[str] = []
    for _ in range(20):
        rng = random.Random(seed)
        world = _build(rng, banned)
        pages = _render(world, rng)
        clashes = _clashes(world, pages)
        if not clashes:
            return pages, _questions(world, rng)
        banned += clashes
    raise RuntimeError(f"seed {seed}: invented names keep clashing with words of the corpus")


def write_set(out: Path, seed: int = 7) -> tuple[Path, Path]:
    """Write ``out/docs/*.md`` and ``out/questions.jsonl``; return the two paths.

    Refuses a docs folder holding Markdown files this set would not write, so a stale
    page of another seed is never indexed with this set's questions.
    """
    pages, questions = generate(seed)
    docs = Path(out) / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    stale = sorted(f.name for f in docs.glob("*.md") if f.name not in pages)
    if stale:
        raise FileExistsError(f"{docs} holds other pages ({', '.join(stale[:3])}...)")
    for name, text in pages.items():
        (docs / name).write_text(text, encoding="utf-8", newline="\n")
    qpath = Path(out) / "questions.jsonl"
    with qpath.open("w", encoding="utf-8", newline="\n") as f:
        for q in questions:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    return docs, qpath


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.fictional_people", description=__doc__.split("\n")[0]
    )
    ap.add_argument("out", type=Path, help="folder for docs/ and questions.jsonl")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    try:
        docs, qpath = write_set(args.out, args.seed)
    except FileExistsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(docs)
    print(qpath)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
