"""Single-hop and two-hop questions over a world, with gold aliases and the facts they rest on.

A candidate is ``(hops, question, answers, facts, chain)``: ``facts`` are the fact keys of the
chain in hop order (see ``passages.py``), ``chain`` the entity names the question walks through
(subject first, answer last).
"""
from __future__ import annotations

import random

from domains.search_qa.world import Person, River, World


def person_answer(p: Person) -> list[str]:
    # surnames are unique in the world, so the surname alone names the person too
    return [p.name, p.surname]


def river_answer(r: River) -> list[str]:
    return [r.name, f"{r.name} River", f"River {r.name}"]


def single_hop(world: World) -> list[tuple]:
    out = []
    for p in world.people:
        town = p.birthplace
        out.append((1, f"Where was {p.name} born?", [town.name], [f"birthplace:{p.uid}"], [p.name, town.name]))
        out.append((1, f"In what year was {p.name} born?", [str(p.birth_year)], [f"birthyear:{p.uid}"],
                    [p.name, str(p.birth_year)]))
        if p.spouse:
            out.append((1, f"Who was {p.name} married to?", person_answer(p.spouse), [f"spouse:{p.uid}"],
                        [p.name, p.spouse.name]))
        if p.employer:
            out.append((1, f"Which organisation did {p.name} work for?", [p.employer.name],
                        [f"employer:{p.uid}"], [p.name, p.employer.name]))
    for t in world.towns:
        out.append((1, f"Which river flows through {t.name}?", river_answer(t.river), [f"river:{t.uid}"],
                    [t.name, t.river.name]))
    for o in world.orgs:
        out.append((1, f"Who founded the {o.name}?", person_answer(o.founder), [f"founder:{o.uid}"],
                    [o.name, o.founder.name]))
        out.append((1, f"In which town was the {o.name} founded?", [o.town.name], [f"orgtown:{o.uid}"],
                    [o.name, o.town.name]))
    for w in world.works:
        out.append((1, f"Who wrote {w.title}?", person_answer(w.author), [f"author:{w.uid}"],
                    [w.title, w.author.name]))
        out.append((1, f"In what year was {w.title} first published?", [str(w.year)], [f"workyear:{w.uid}"],
                    [w.title, str(w.year)]))
    return out


def two_hop(world: World) -> list[tuple]:
    out = []
    for p in world.people:
        town = p.birthplace
        out.append((2, f"Which river flows through the birthplace of {p.name}?", river_answer(town.river),
                    [f"birthplace:{p.uid}", f"river:{town.uid}"], [p.name, town.name, town.river.name]))
        if p.spouse:
            s = p.spouse
            out.append((2, f"Where was the spouse of {p.name} born?", [s.birthplace.name],
                        [f"spouse:{p.uid}", f"birthplace:{s.uid}"], [p.name, s.name, s.birthplace.name]))
        if p.employer:
            o = p.employer
            out.append((2, f"Who founded the organisation that {p.name} worked for?", person_answer(o.founder),
                        [f"employer:{p.uid}", f"founder:{o.uid}"], [p.name, o.name, o.founder.name]))
    for o in world.orgs:
        out.append((2, f"Which river flows through the town where the {o.name} was founded?",
                    river_answer(o.town.river), [f"orgtown:{o.uid}", f"river:{o.town.uid}"],
                    [o.name, o.town.name, o.town.river.name]))
        out.append((2, f"In what year was the founder of the {o.name} born?", [str(o.founder.birth_year)],
                    [f"founder:{o.uid}", f"birthyear:{o.founder.uid}"],
                    [o.name, o.founder.name, str(o.founder.birth_year)]))
    for w in world.works:
        a = w.author
        out.append((2, f"Where was the author of {w.title} born?", [a.birthplace.name],
                    [f"author:{w.uid}", f"birthplace:{a.uid}"], [w.title, a.name, a.birthplace.name]))
        if a.spouse:
            out.append((2, f"Who was the author of {w.title} married to?", person_answer(a.spouse),
                        [f"author:{w.uid}", f"spouse:{a.uid}"], [w.title, a.name, a.spouse.name]))
    return out


def pick_questions(world: World, n: int, two_hop_share: float, rng: random.Random) -> list[tuple]:
    """``n`` questions, about ``two_hop_share`` of them two-hop, spreading over distinct subjects."""
    pools = {1: single_hop(world), 2: two_hop(world)}
    want = {2: min(round(n * two_hop_share), len(pools[2]))}
    want[1] = n - want[2]
    chosen, used_subjects = [], set()
    for hops in (1, 2):
        pool = pools[hops]
        rng.shuffle(pool)
        fresh, repeat, seen = [], [], set(used_subjects)
        # fresh subjects first; repeat a subject only when the pool has no new one left
        for cand in pool:
            (repeat if cand[4][0] in seen else fresh).append(cand)
            seen.add(cand[4][0])
        taken = (fresh + repeat)[:want[hops]]
        used_subjects.update(c[4][0] for c in taken)
        chosen += taken
    if len(chosen) < n:
        raise ValueError(f"world {world.group!r} supports only {len(chosen)} questions, {n} requested")
    rng.shuffle(chosen)
    return chosen
