"""The offline proposer against a real run store, real seed harnesses, real domains and the sandbox."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from domains import get_domain
from harnesses.contract import Call, Finish, Prompt, from_wire
from harnesses.proposers import ProposerContext
from harnesses.proposers.claude_tools import check_source
from harnesses.proposers.offline import (
    OfflineProposer, failure_profile, harness_id, masked, rank,
)
from harnesses.proposers.primitives import FAILURES, applied_tags, library
from harnesses.proposers.primitives.edit import (
    append_sentence, class_constant, instruction_literal, set_class_constant,
)
from harnesses.sandbox import HarnessSandbox, static_violations
from harnesses.validate import prompt_only_violation
from whale.backends.base import Backend, GenResult, Sampling
from whale.engine import Engine
from whale.store import Store
from whale.types import Rollout

ROOT = Path(__file__).resolve().parents[1]
SEEDS = {d: (ROOT / "harnesses" / "seeds" / f"{d}.py").read_text()
         for d in ("math_reasoning", "search_qa", "chess_puzzles")}
MATH, SEARCH, CHESS = SEEDS["math_reasoning"], SEEDS["search_qa"], SEEDS["chess_puzzles"]
PROGRAM = (ROOT / "harnesses" / "examples" / "math_program.py").read_text()


def rollout(hid: str, i: int, split="harness", weights="w2", cycle=1, stop="answered", formatted=False,
            reward=0.0, messages=None) -> Rollout:
    messages = messages if messages is not None else [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "```python\nprint(5)\n```"},
        {"role": "user", "content": "Output:\n5"}, {"role": "assistant", "content": "It is 5."}]
    return Rollout(run_id="r1", cycle=cycle, phase="harness", step=1, split=split, example_id=f"e{i}",
                   sample_idx=0, harness_id=hid, weights_id=weights, seed=i, reward=reward,
                   formatted=formatted, stop_reason=stop, turns=2, tokens_out=40, messages=messages)


def register(store: Store, hid: str, domain: str, components=(), parents=(), origin="seed") -> None:
    store.insert("harnesses", [{"harness_id": hid, "domain": domain, "path": f"{hid}.py",
                                "parents": list(parents), "origin": origin, "hypothesis": "", "axis": None,
                                "components": list(components), "status": "ok", "error": None,
                                "cycle": 0, "iteration": 1}])


def context(tmp_path: Path, domain: str, source: str, rollouts=(), M=2, prompt_only=False, iteration=2,
            components=(), parents=(), registered=True) -> ProposerContext:
    archive = tmp_path / "archive"
    archive.mkdir(exist_ok=True)
    hid = harness_id(source)
    (archive / f"{hid}.py").write_text(source)
    with Store(tmp_path / "rollouts.duckdb") as store:
        if registered:
            register(store, hid, domain, components, parents)
        store.insert_rollouts(list(rollouts))
    return ProposerContext(run_id="r1", domain=domain, cycle=1, iteration=iteration, M=M, seed=0,
                           incumbent_id=hid, archive_dir=archive, store_path=tmp_path / "rollouts.duckdb",
                           notes_path=ROOT / "domains" / domain / "notes.md",
                           contract_path=ROOT / "harnesses" / "contract.py", prompt_only=prompt_only)


def primitive_of(candidate) -> str:
    return applied_tags(candidate.source)[-1]


def edited(domain: str, name: str, source: str) -> str:
    info, primitives = library(domain)
    return next(p for p in primitives if p.name == name).apply(source, info).source


def hooks(source: str, calls: list[tuple[str, object]]) -> list:
    """Run hook calls of one episode in the sandbox; return the actions."""
    out = []
    with HarnessSandbox(source) as sandbox:
        for hook, arg in calls:
            [(ok, payload)] = sandbox.calls([(0, hook, arg)])
            assert ok, payload
            payload.pop("max_turns", None)
            payload.pop("token_budget", None)
            out.append(from_wire(payload))
    return out


def test_failure_profile_reads_the_latest_weights_harness_split_only(tmp_path):
    hid = harness_id(MATH)
    rows = [rollout(hid, 0, formatted=True, reward=1.0), rollout(hid, 1, formatted=True),
            rollout(hid, 2, stop="truncated"), rollout(hid, 3, stop="turn_cap"),
            rollout(hid, 4, stop="error"),
            rollout(hid, 5, messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "5"}]),
            rollout(hid, 6, messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "x"},
                                      {"role": "user", "content": "Error: Traceback (most recent call last)"}]),
            rollout(hid, 7),
            # older weights and other splits must not count
            rollout(hid, 8, weights="w1", cycle=0, stop="error"), rollout(hid, 9, split="test", stop="error")]
    ctx = context(tmp_path, "math_reasoning", MATH, rows)
    with Store(ctx.store_path, read_only=True) as store:
        p = failure_profile(store.con, hid)
    assert p["n"] == 8 and p["weights_id"] == "w2"
    assert p["success"] == 1 / 8 and p["wrong"] == 1 / 8 and p["error"] == 1 / 8
    assert p["truncated"] == 1 / 8 and p["turn_cap"] == 1 / 8
    assert p["not_formatted"] == 5 / 8  # rows 2, 3, 5, 6, 7 (the error row is not counted)
    assert p["tool_error"] == 1 / 8 and p["no_tool"] == 1 / 8
    assert p["mean_turns"] == 2 and p["mean_tokens_out"] == 40
    with Store(ctx.store_path, read_only=True) as store:
        assert failure_profile(store.con, "000000000000")["n"] == 0


@pytest.mark.parametrize("kind", ["not_formatted", "truncated", "turn_cap", "tool_error"])
def test_the_dominant_failure_picks_a_primitive_that_addresses_it(kind):
    import random

    _, primitives = library("math_reasoning")
    profile = {k: 0.0 for k in FAILURES} | {kind: 0.9}
    assert kind in rank(primitives, profile, random.Random(0))[0].addresses


def test_unformatted_incumbent_gets_format_primitives_first(tmp_path):
    hid = harness_id(MATH)
    ctx = context(tmp_path, "math_reasoning", MATH, [rollout(hid, i) for i in range(8)], M=3)
    proposal = OfflineProposer(seed=0).propose(ctx)
    assert proposal.proposer == "offline" and len(proposal.candidates) == 3
    _, primitives = library("math_reasoning")
    by_name = {p.name: p for p in primitives}
    for c in proposal.candidates:
        assert "not_formatted" in by_name[primitive_of(c)].addresses
        assert c.parents == [hid] and c.origin == "offline" and "not formatted 100% of 8" in c.hypothesis
    assert len({c.axis for c in proposal.candidates}) == 3  # one mechanism per axis


def test_same_seed_same_candidates_and_the_seed_breaks_ties(tmp_path):
    hid = harness_id(SEARCH)
    ctx = context(tmp_path, "search_qa", SEARCH, [rollout(hid, i) for i in range(4)], M=3)
    first = [(c.source, c.hypothesis) for c in OfflineProposer(seed=3).propose(ctx).candidates]
    assert first == [(c.source, c.hypothesis) for c in OfflineProposer(seed=3).propose(ctx).candidates]
    # answer_prefix and format_nudge tie on this profile: some seed orders them the other way
    orders = {tuple(primitive_of(c) for c in OfflineProposer(seed=s).propose(ctx).candidates) for s in range(12)}
    assert len(orders) > 1


@pytest.mark.parametrize("domain", SEEDS)
def test_every_candidate_loads_in_the_sandbox_and_starts_on_a_real_observation(tmp_path, domain):
    data = get_domain(domain, str(tmp_path / "data"))
    data.prepare({"weight": 2, "harness": 2, "test": 2}, seed=0)
    env = data.environment(data.examples("harness")[0])
    observation = env.reset()
    _, primitives = library(domain)
    ctx = context(tmp_path, domain, SEEDS[domain], M=len(primitives))
    candidates = OfflineProposer(seed=0).propose(ctx).candidates
    assert len(candidates) == len(primitives)  # every primitive applies to a seed
    for c in candidates:
        assert static_violations(c.source) == [], primitive_of(c)
        assert check_source(c.source) is None
        with HarnessSandbox(c.source) as sandbox:
            [(ok, payload)] = sandbox.calls([(0, "start", observation)])
        assert ok, f"{primitive_of(c)}: {payload}"
        prompt = from_wire({k: v for k, v in payload.items() if k not in ("max_turns", "token_budget")})
        assert isinstance(prompt, Prompt) and prompt.messages, primitive_of(c)
    env.close()


@pytest.mark.parametrize("domain,source", [*SEEDS.items(), ("math_reasoning", PROGRAM)])
def test_prompt_only_candidates_differ_only_in_string_constants(tmp_path, domain, source):
    ctx = context(tmp_path, domain, source, M=3, prompt_only=True)
    candidates = OfflineProposer(seed=0).propose(ctx).candidates
    assert len(candidates) == 3
    for c in candidates:
        assert c.axis == "prompt" and c.source != source
        assert masked(c.source) == masked(source)
        assert prompt_only_violation(c.source, source) is None  # the harness phase's own check
        assert check_source(c.source, source) is None
        assert len(c.source.splitlines()) <= len(source.splitlines()) + 3  # one sentence, maybe wrapped


def test_archived_candidates_are_not_proposed_again(tmp_path):
    hid = harness_id(MATH)
    ctx = context(tmp_path, "math_reasoning", MATH, [rollout(hid, i) for i in range(4)], M=2)
    first = OfflineProposer(seed=0).propose(ctx).candidates
    for c in first:
        (ctx.archive_dir / f"{harness_id(c.source)}.py").write_text(c.source)
    second = OfflineProposer(seed=0).propose(ctx).candidates
    assert len(second) == 2
    assert not {c.source for c in first} & {c.source for c in second}
    assert not {primitive_of(c) for c in first} & {primitive_of(c) for c in second}


def test_lineage_components_accumulate_and_are_not_reapplied(tmp_path):
    ctx = context(tmp_path, "search_qa", SEARCH, M=3)
    parent = OfflineProposer(seed=0).propose(ctx).candidates[0]
    tag = primitive_of(parent)
    assert parent.components == [tag]
    child_id = harness_id(parent.source)
    (ctx.archive_dir / f"{child_id}.py").write_text(parent.source)
    with Store(ctx.store_path) as store:
        register(store, child_id, "search_qa", parent.components, parent.parents, origin="offline")
    ctx.incumbent_id = child_id
    children = OfflineProposer(seed=0).propose(ctx).candidates
    assert children
    for c in children:
        assert c.components[:-1] == [tag] and c.components[-1] != tag
        assert applied_tags(c.source) == [tag, c.components[-1]]
        assert c.parents == [child_id] and c.source.startswith(parent.source.rstrip("\n"))


def test_lineage_is_read_from_the_source_when_the_store_lacks_it(tmp_path):
    nudged = edited("math_reasoning", "format_nudge", MATH)
    ctx = context(tmp_path, "math_reasoning", nudged, M=20, registered=False)
    candidates = OfflineProposer(seed=0).propose(ctx).candidates
    assert candidates and all(c.components[0] == "format_nudge" for c in candidates)
    assert "format_nudge" not in [c.components[-1] for c in candidates]


def test_format_nudge_asks_once_for_the_answer_only_when_it_is_missing():
    source = edited("math_reasoning", "format_nudge", MATH)
    assert class_constant(source, "max_turns") == 3
    start = ("start", {"question": "What is 2+3?"})
    _, nudge, after = hooks(source, [start, ("act", "It is five."), ("act", "Still five.")])
    assert isinstance(nudge, Prompt) and "\\boxed{}" in nudge.messages[0]["content"]
    assert isinstance(after, Finish)  # one nudge only
    _, done = hooks(source, [start, ("act", "So \\boxed{5}.")])
    assert isinstance(done, Finish)


def test_answer_prefix_opens_the_last_turn_with_the_answer_tag():
    source = edited("search_qa", "answer_prefix", SEARCH)
    obs = {"tool": "search", "error": None, "passages": [{"title": "Brasko", "text": "A town."}]}
    first, call, last = hooks(source, [("start", {"question": "Where?"}), ("act", "<search>x</search>"),
                                       ("observe", obs)])
    assert first.prefix == "" and isinstance(call, Call)
    assert (last.prefix, last.stop) == ("<answer>", ["</answer>"])


def test_search_arguments_and_query_rewrites_reach_the_call():
    source = edited("search_qa", "query_add_entity", edited("search_qa", "top_k_3", SEARCH))
    _, call = hooks(source, [("start", {"question": "Where was Tavel Orimund born?"}),
                             ("act", "<search>birthplace</search>")])
    assert call == Call("search", {"query": "birthplace Tavel Orimund", "top_k": 3, "max_chars": 800})


SHARED = """from harnesses.contract import BaseHarness, Prompt

ASK = Prompt(messages=[{"role": "user", "content": "Answer in <answer> tags, please."}])


class Harness(BaseHarness):
    max_turns = 2

    def start(self, observation):
        return ASK

    def act(self, completion):
        return ASK
"""


def test_layers_copy_what_they_change_so_shared_prompts_do_not_leak_between_episodes():
    source = edited("search_qa", "answer_prefix", SHARED)
    with HarnessSandbox(source) as sandbox:
        sandbox.calls([(0, "start", {"question": "q"})])
        [(_, last)] = sandbox.calls([(0, "act", "no tags")])
        [(_, fresh)] = sandbox.calls([(1, "start", {"question": "q"})])
    assert last["prefix"] == "<answer>" and fresh["prefix"] == ""


class ScriptedMath(Backend):
    """A stand-in model for the program flow: code on the code turn, digits on the answer turn."""

    weights_id = "scripted"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def generate(self, requests, sampling):
        out = []
        for req in requests:
            context = self.tokenizer.decode(req.ids)
            text = "6}" if context.endswith("\\boxed{") else "print(2 * 3)\n```"
            out.append(GenResult(self.tokenizer.encode(text, add_special_tokens=False), "stop"))
        return out


def test_program_then_answer_runs_the_program_and_boxes_its_output(tmp_path, tokenizer):
    domain = get_domain("math_reasoning", str(tmp_path))
    example = domain.generate({"weight": 0, "harness": 1, "test": 0}, seed=0)["harness"][0]
    example = type(example)(example.id, example.split, example.public, {"answer": 6})
    source = edited("math_reasoning", "program_then_answer", MATH)
    [r] = Engine(ScriptedMath(tokenizer), domain, Sampling()).run(source, [example], k=1, seed=0, progress=False)
    assert r.error is None and r.stop_reason == "answered" and r.turns == 2
    assert r.messages[-1]["content"] == "\\boxed{6}" and "The program printed:\n6" in r.messages[-2]["content"]
    assert (r.reward, r.formatted) == (1.0, True)


# --- the source edits themselves ---------------------------------------------------------------

def test_class_constants_are_edited_in_place_or_layered_when_inherited():
    once = set_class_constant(MATH, "max_turns", 5, "max_turns_5", "h")
    assert "max_turns = 5  # offline proposer: max_turns_5" in once
    assert len(once.splitlines()) == len(MATH.splitlines())
    bare = "from harnesses.contract import BaseHarness\n\nclass Harness(BaseHarness):\n    pass\n"
    assert class_constant(bare, "token_budget") == 512
    layered = set_class_constant(bare, "token_budget", 1024, "t", "h")
    assert class_constant(layered, "token_budget") == 1024 and static_violations(layered) == []


@pytest.mark.parametrize("prompt", [
    'TEXT = "Answer in <answer> tags, please."\n',
    'TEXT = """Answer in\n<answer> tags."""\n',
    'TEXT = (\n    "Answer in "\n    "<answer> tags."\n)\n',
])
def test_a_sentence_joins_the_instruction_literal(prompt):
    source = prompt + "x = 1\n"
    out = append_sentence(source, "<answer>", "\nCheck it.", "c")
    namespace: dict = {}
    exec(compile(out, "m", "exec"), namespace)  # noqa: S102 (trusted test text)
    assert namespace["TEXT"].endswith("tags.\nCheck it.") or namespace["TEXT"].endswith("please.\nCheck it.")
    assert masked(out) == masked(source) and "offline proposer: c" in out


def test_the_instruction_literal_is_the_one_start_shows():
    node, text = instruction_literal(PROGRAM, "\\boxed{")
    assert "Write a short Python program" in text  # not the docstring, not the nudge in act()
    assert isinstance(ast.parse(PROGRAM), ast.Module) and node.lineno > 30


# --- chess ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def chess_examples(tmp_path_factory):
    domain = get_domain("chess_puzzles", str(tmp_path_factory.mktemp("chess")))
    return domain, domain.generate({"weight": 0, "harness": 3, "test": 0}, seed=0)["harness"]


class ChessPicker(Backend):
    """A stand-in model for a choice-constrained turn: picks the reference move, or another one."""

    weights_id = "scripted"

    def __init__(self, tokenizer, examples, right=True):
        self.tokenizer, self.right, self.choices = tokenizer, right, {}
        self.gold = {e.public["fen"]: e.gold["moves"][0] for e in examples}

    def generate(self, requests, sampling):
        out = []
        for req in requests:
            fen = self.tokenizer.decode(req.ids).rsplit("FEN: ", 1)[1].split("\n", 1)[0]
            self.choices[fen] = req.choices
            wanted = self.gold[fen] + "</move>"
            pick = wanted if self.right else next(c for c in req.choices if c != wanted)
            out.append(GenResult(self.tokenizer.encode(pick, add_special_tokens=False), "stop"))
        return out


@pytest.mark.parametrize("right", [True, False])
def test_legal_choices_make_every_answer_a_legal_move(chess_examples, tokenizer, right):
    domain, examples = chess_examples
    examples = [e for e in examples if e.public["n_solver_moves"] == 1]
    assert examples
    source = edited("chess_puzzles", "legal_choices", CHESS)
    backend = ChessPicker(tokenizer, examples, right)
    rollouts = Engine(backend, domain, Sampling()).run(source, examples, k=1, seed=0, progress=False)
    for r, ex in zip(rollouts, examples):
        legal = domain.environment(ex).reset()["legal_uci"]
        assert backend.choices[ex.public["fen"]] == [m + "</move>" for m in legal]
        assert r.error is None and r.formatted and r.turns == 1
        assert r.messages[-1]["content"].startswith("<move>") and r.messages[-1]["content"].endswith("</move>")
        assert r.reward == (1.0 if right else 0.0)


@pytest.mark.parametrize("name", ["grouped_moves", "annotated_moves"])
def test_move_lists_replace_the_flat_list_and_keep_every_move(chess_examples, name):
    domain, examples = chess_examples
    observation = domain.environment(examples[0]).reset()
    [prompt] = hooks(edited("chess_puzzles", name, CHESS), [("start", observation)])
    text = prompt.messages[-1]["content"]
    assert " ".join(observation["legal_uci"]) not in text
    for uci, san in zip(observation["legal_uci"], observation["legal_san"]):
        assert text.count(f"{uci} ({san})") == 1


def test_lenient_move_plays_the_last_legal_move_named(chess_examples):
    domain, examples = chess_examples
    observation = domain.environment(examples[0]).reset()
    first_san, last_uci = observation["legal_san"][0], observation["legal_uci"][-1]
    source = edited("chess_puzzles", "lenient_move", CHESS)
    _, call = hooks(source, [("start", observation), ("act", f"Maybe {first_san}!, no: {last_uci}.")])
    assert call == Call("move", {"move": last_uci})
    _, retry = hooks(source, [("start", observation), ("act", "I resign zz9")])
    assert isinstance(retry, Prompt)  # nothing legal named: the seed's own format retry
