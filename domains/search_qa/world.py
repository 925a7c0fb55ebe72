"""A fictional world of people, towns, rivers, organisations and written works.

Every name is built from syllables and is unique in the whole world (no word of one name is
reused in another), so a model cannot know any fact in advance and a search for a name finds
that entity's passages. Facts are consistent: spouses are mutual, founders are born before
their organisation is founded, authors before their works are published.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

ONSETS = ("b", "br", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "th", "v", "z", "h", "j",
          "dr", "st", "tr")
VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ae", "ei", "ou")
CODAS = ("n", "r", "l", "s", "m", "th", "nd", "rk", "x", "v")
OCCUPATIONS = ("painter", "engineer", "cartographer", "composer", "physician", "shipwright",
               "botanist", "clockmaker", "architect", "poet", "astronomer", "glassblower")
ORG_KINDS = ("Shipping Company", "Bank", "Observatory", "Printing House", "Railway",
             "Trading Company", "Conservatory", "Botanical Society", "Ironworks", "Academy")
WORK_KINDS = ("novel", "play", "treatise", "memoir", "poetry collection", "travel journal")
WORK_NOUNS = ("Lanterns", "Tides", "Orchards", "Letters", "Bells", "Winters", "Gardens", "Maps",
              "Harbours", "Storms", "Mirrors", "Songs")
REGION_KINDS = ("Valley", "Highlands", "Lowlands", "Marches", "Coast", "Plateau")


class NameMaker:
    """Unique capitalised pseudo-words; a word is never handed out twice."""

    def __init__(self, rng: random.Random, used: set[str]):
        self.rng = rng
        self.used = used

    def word(self, syllables: int) -> str:
        while True:
            w = "".join(self.rng.choice(ONSETS) + self.rng.choice(VOWELS) for _ in range(syllables))
            # a closing consonant only at the end keeps names pronounceable (Tavel, Orimund)
            if self.rng.random() < 0.6:
                w += self.rng.choice(CODAS)
            if 4 <= len(w) <= 11 and w not in self.used:
                self.used.add(w)
                return w.capitalize()


@dataclass(eq=False)
class River:
    uid: str
    name: str
    length_km: int
    source: str
    towns: list = field(default_factory=list)


@dataclass(eq=False)
class Town:
    uid: str
    name: str
    region: str
    founded: int
    population: int
    river: River


@dataclass(eq=False)
class Person:
    uid: str
    given: str
    surname: str
    birth_year: int
    birthplace: Town
    occupation: str
    spouse: Person | None = None
    married: int = 0
    employer: Org | None = None
    works: list = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.given} {self.surname}"


@dataclass(eq=False)
class Org:
    uid: str
    name: str
    founded: int
    founder: Person
    town: Town
    staff: list = field(default_factory=list)


@dataclass(eq=False)
class Work:
    uid: str
    title: str
    kind: str
    year: int
    author: Person
    setting: Town


@dataclass
class World:
    """One group of the encyclopaedia: its entities only link to each other."""

    group: str
    rivers: list[River]
    towns: list[Town]
    people: list[Person]
    orgs: list[Org]
    works: list[Work]


def world_sizes(n_questions: int) -> dict[str, int]:
    """Entity counts that give enough distinct question subjects for ``n_questions``."""
    towns = max(3, math.ceil(0.25 * n_questions))
    return {"people": max(4, math.ceil(0.6 * n_questions)), "towns": towns,
            "rivers": max(2, math.ceil(towns / 2)), "orgs": max(2, math.ceil(0.2 * n_questions)),
            "works": max(2, math.ceil(0.25 * n_questions))}


def build_world(group: str, n_questions: int, rng: random.Random, names: NameMaker) -> World:
    sizes = world_sizes(n_questions)

    def uid(kind: str, i: int) -> str:
        return f"{group}/{kind}{i}"

    regions = [f"{names.word(2)} {rng.choice(REGION_KINDS)}" for _ in range(2)]
    rivers = [River(uid("river", i), names.word(2), rng.randint(40, 900), names.word(2))
              for i in range(sizes["rivers"])]
    towns = []
    for i in range(sizes["towns"]):
        # every river gets a town before any river gets a second one
        river = rivers[i] if i < len(rivers) else rng.choice(rivers)
        town = Town(uid("town", i), names.word(rng.choice((2, 3))), rng.choice(regions),
                    rng.randint(900, 1650), rng.randint(2, 90) * 1000, river)
        river.towns.append(town)
        towns.append(town)
    people = [Person(uid("person", i), names.word(2), names.word(3), rng.randint(1780, 1880),
                     rng.choice(towns), rng.choice(OCCUPATIONS)) for i in range(sizes["people"])]
    _marry(people, rng)
    orgs = _found_orgs(group, sizes["orgs"], people, towns, rng, names)
    works = _write_works(group, sizes["works"], people, towns, rng, names)
    return World(group, rivers, towns, people, orgs, works)


def _marry(people: list[Person], rng: random.Random) -> None:
    pool = people[:]
    rng.shuffle(pool)
    for a, b in zip(pool[0::2], pool[1::2], strict=False):
        if rng.random() < 0.8:
            a.spouse, b.spouse = b, a
            a.married = b.married = max(a.birth_year, b.birth_year) + rng.randint(19, 35)


def _found_orgs(group, n, people, towns, rng, names) -> list[Org]:
    orgs = []
    founders = rng.sample(people, n)
    for i, founder in enumerate(founders):
        org = Org(f"{group}/org{i}", f"{names.word(2)} {rng.choice(ORG_KINDS)}",
                  founder.birth_year + rng.randint(25, 55), founder, rng.choice(towns))
        orgs.append(org)
    for person in people:
        if rng.random() < 0.8:
            person.employer = rng.choice(orgs)
            person.employer.staff.append(person)
    return orgs


def _write_works(group, n, people, towns, rng, names) -> list[Work]:
    works = []
    for i in range(n):
        author = rng.choice(people)
        word = names.word(rng.choice((2, 3)))
        title = rng.choice((f"The {rng.choice(WORK_NOUNS)} of {word}", f"{rng.choice(WORK_NOUNS)} from {word}",
                            f"{word} and the {rng.choice(WORK_NOUNS)}"))
        work = Work(f"{group}/work{i}", title, rng.choice(WORK_KINDS), author.birth_year + rng.randint(22, 60),
                    author, rng.choice(towns))
        author.works.append(work)
        works.append(work)
    return works
