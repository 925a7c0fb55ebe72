"""Encyclopaedia passages for a world, each tagged with the facts it states.

A fact key is ``relation:uid`` (``birthplace:test/person3``). Questions cite the passages that
state the facts of their chain, so tests can check that every answer is written somewhere. A
passage never states an attribute of an entity it merely mentions (a person's passage names
the spouse but not where the spouse was born), which keeps two-hop questions two-hop.
"""
from __future__ import annotations

import random

from domains.search_qa.world import Org, Person, River, Town, Work, World

LANDMARKS = ("a stone bridge", "an old clock tower", "a covered market", "a lighthouse",
             "a salt warehouse", "a walled garden", "a bell foundry")


CHILDREN = ("one child", "two children", "three children", "four children", "five children")


def passage(title: str, text: str, facts: tuple[str, ...] = ()) -> dict:
    return {"title": title, "text": text, "facts": list(facts)}


def world_passages(world: World, rng: random.Random) -> list[dict]:
    out = []
    for person in world.people:
        out += person_passages(person, rng)
    natives = {}
    for person in world.people:
        natives.setdefault(person.birthplace.uid, []).append(person.name)
    for town in world.towns:
        out += town_passages(town, natives.get(town.uid, [])[:3], rng)
    for river in world.rivers:
        out.append(river_passage(river))
    for org in world.orgs:
        out += org_passages(org, rng)
    for work in world.works:
        out.append(work_passage(work))
    out += event_passages(world, rng)
    return out


def person_passages(p: Person, rng: random.Random) -> list[dict]:
    born = rng.choice((
        f"{p.name} (born {p.birth_year}) was a {p.occupation} from {p.birthplace.name}. {p.surname} was born "
        f"in {p.birthplace.name} in {p.birth_year} and trained as a {p.occupation} as a young adult.",
        f"{p.name} was a {p.occupation}. Born in {p.birth_year} in the town of {p.birthplace.name}, "
        f"{p.surname} showed an early talent for the work of a {p.occupation}.",
    ))
    if p.spouse is not None:
        family = (f"In {p.married}, {p.name} married {p.spouse.name}. The couple had {rng.choice(CHILDREN)} "
                  f"and kept a house with {rng.choice(LANDMARKS)} in view.")
    else:
        family = (f"{p.name} never married. Letters from {p.surname} describe long walks and a large "
                  f"collection of {rng.choice(('maps', 'seashells', 'pressed flowers', 'coins'))}.")
    if p.employer is not None:
        career = f"{p.surname} worked for the {p.employer.name} for {rng.randint(3, 30)} years."
    else:
        career = f"{p.surname} worked independently and took commissions from private patrons."
    for w in p.works:
        career += f" {p.surname} wrote the {w.kind} {w.title} ({w.year})."
    return [
        passage(p.name, born, (f"birthplace:{p.uid}", f"birthyear:{p.uid}")),
        passage(p.name, family, (f"spouse:{p.uid}",) if p.spouse else ()),
        passage(p.name, career, (f"employer:{p.uid}",) if p.employer else ()),
    ]


def town_passages(t: Town, natives: list[str], rng: random.Random) -> list[dict]:
    main = (f"{t.name} is a town in the {t.region}, founded in {t.founded}. The {t.river.name} River "
            f"flows through {t.name}, which grew up around {rng.choice(LANDMARKS)}.")
    extra = f"{t.name} has about {t.population} inhabitants and holds a market every week."
    if natives:
        extra += f" Notable people born in {t.name} include {_join(natives)}."
    return [passage(t.name, main, (f"river:{t.uid}",)), passage(t.name, extra)]


def river_passage(r: River) -> dict:
    text = (f"The {r.name} River rises in the {r.source} Mountains and runs for {r.length_km} km. "
            f"It flows through {_join([t.name for t in r.towns])}.")
    return passage(f"{r.name} River", text)


def org_passages(o: Org, rng: random.Random) -> list[dict]:
    main = f"The {o.name} was founded in {o.founded} by {o.founder.name} in {o.town.name}."
    staff = [p.name for p in o.staff][:4]
    extra = f"At its height the {o.name} employed about {rng.randint(2, 60) * 10} people."
    if staff:
        extra += f" Its staff included {_join(staff)}."
    return [passage(o.name, main, (f"founder:{o.uid}", f"orgtown:{o.uid}")), passage(o.name, extra)]


def work_passage(w: Work) -> dict:
    text = (f"{w.title} is a {w.kind} by {w.author.name}, first published in {w.year}. "
            f"Much of it takes place in {w.setting.name}.")
    return passage(w.title, text, (f"author:{w.uid}", f"workyear:{w.uid}"))


def event_passages(world: World, rng: random.Random) -> list[dict]:
    """Passages that mention people without stating their facts: retrieval distractors."""
    out = []
    for _ in range(max(1, len(world.people) // 5)):
        town = rng.choice(world.towns)
        year = rng.randint(1820, 1920)
        guests = [p.name for p in rng.sample(world.people, min(3, len(world.people)))]
        out.append(passage(f"{year} {town.name} Fair",
                           f"The {year} {town.name} Fair drew visitors from across the {town.region}. "
                           f"Guests included {_join(guests)}."))
    return out


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
