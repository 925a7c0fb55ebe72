"""The harness contract: one interface for every domain.

A harness is a Python module that defines a class named ``Harness`` subclassing
``harnesses.contract.BaseHarness``. The rollout engine creates one instance per episode and
drives it with three hooks; everything the harness returns is plain data, so the instance can
live in a sandboxed worker process while the model and the environment stay in the engine.

    start(observation)   -> Prompt                  first messages of the episode
    act(completion)      -> Call | Prompt | Finish  what to do with the model's turn
    observe(observation) -> Prompt | Finish         what to show after a tool call

Flow of one episode::

    prompt = h.start(env.reset())
    loop:  the model writes one assistant turn under prompt's generation controls
           action = h.act(text)
           Call   -> the environment runs the tool; its observation goes to h.observe(...),
                     unless the environment says the episode is over (done)
           Prompt -> appended as is (a retry, a nudge): the model writes the next turn
           Finish -> the episode ends; the verifier reads the finished conversation

Rules the engine enforces (the harness cannot change them):
- The conversation is append-only: a ``Prompt`` adds messages, it never rewrites earlier ones,
  so the tokens the model trained on are exactly the tokens it saw.
- The engine owns every limit and re-checks every reply in its own process: ``max_turns`` caps
  assistant turns (clamped to ``HARD_MAX_TURNS``); reaching it ends the
  episode with stop reason ``turn_cap``. ``token_budget`` caps the tokens the model generates in
  the whole episode; each turn's ``max_new_tokens`` is cut to what is left, and running out
  ends the episode as ``truncated``.
- Sampling temperature and the verifier are not the harness's to choose.
- Observations carry only what the environment makes public: never the gold answer.

``act`` receives the whole assistant message: the ``prefix`` (if any) followed by what the model
wrote. Generation controls of a ``Prompt`` apply to the next assistant turn: ``max_new_tokens``,
``stop`` strings (the stop string stays in the output), ``prefix`` (an assistant prefill the
model continues; it is part of the assistant message but not of the trained tokens), and
``choices`` (the turn's output must be exactly one of these strings).

Harness code runs in an OS jail (see ``harnesses/jail.py`` and ``harnesses/sandbox.py``):
standard-library imports from an allow-list only, no files, no network, no environment
variables, no other processes, limited CPU, memory, processes and time. A value over a cap is
clamped and recorded in the rollout's verdict (``clamped``), never trusted.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

HARD_MAX_TURNS = 16
HARD_TOKEN_BUDGET = 8192
MAX_PROMPT_CHARS = 200_000  # all messages of one Prompt together
MAX_CHOICES = 1024
MAX_CHOICE_CHARS = 512
ROLES = ("system", "user", "tool")


@dataclass
class Prompt:
    """Messages to append before the next assistant turn, with that turn's controls."""

    messages: list[dict] = field(default_factory=list)
    max_new_tokens: int = 256
    stop: list[str] = field(default_factory=list)
    prefix: str = ""
    choices: list[str] | None = None


@dataclass
class Call:
    """Ask the environment to run one of its tools (``search``, ``python``, ``move``)."""

    tool: str
    args: dict = field(default_factory=dict)


@dataclass
class Finish:
    """End the episode; the verifier judges the conversation as it stands."""

    reason: str = "answered"


Action = Prompt | Call | Finish
KINDS = {"prompt": Prompt, "call": Call, "finish": Finish}


class BaseHarness:
    """Defaults every harness inherits. Override the hooks; keep the class name ``Harness``."""

    max_turns: int = 2
    token_budget: int = 512

    def start(self, observation: dict) -> Prompt:
        raise NotImplementedError

    def act(self, completion: str) -> Call | Prompt | Finish:
        return Finish()

    def observe(self, observation: dict) -> Prompt | Finish:
        return Finish()


def to_wire(action) -> dict:
    """Serialise an action for the trip from the sandbox worker to the engine."""
    for kind, cls in KINDS.items():
        if type(action) is cls:
            return {"kind": kind, **asdict(action)}
    raise TypeError(f"a hook must return Prompt, Call or Finish, not {type(action).__name__}")


def from_wire(data: dict):
    """Rebuild and check an action that came from a (untrusted) worker."""
    if not isinstance(data, dict):
        raise ValueError(f"an action must be an object, got {type(data).__name__}")
    kind = data.get("kind")
    if kind not in KINDS:
        raise ValueError(f"unknown action kind {kind!r}")
    fields = {k: v for k, v in data.items() if k != "kind"}
    action = KINDS[kind](**fields)
    if isinstance(action, Prompt):
        _check_prompt(action)
    elif isinstance(action, Call) and not (isinstance(action.tool, str) and isinstance(action.args, dict)):
        raise ValueError("Call needs a tool name (str) and args (dict)")
    return action


def _check_prompt(p: Prompt) -> None:
    if not isinstance(p.messages, list) or not isinstance(p.stop, list):
        raise ValueError("messages and stop must be lists")
    for m in p.messages:
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise ValueError(f"a message must be {{'role': one of {ROLES}, 'content': str}}, got {m!r}")
    if not isinstance(p.max_new_tokens, int) or p.max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive int, got {p.max_new_tokens!r}")
    if not all(isinstance(s, str) and s for s in p.stop):
        raise ValueError("stop must be a list of non-empty strings")
    if not isinstance(p.prefix, str):
        raise ValueError("prefix must be a string")
    if p.choices is not None and not (p.choices and all(isinstance(c, str) and c for c in p.choices)):
        raise ValueError("choices must be None or a non-empty list of non-empty strings")
    size = sum(len(m["content"]) for m in p.messages) + len(p.prefix) + sum(map(len, p.stop))
    if size > MAX_PROMPT_CHARS:
        raise ValueError(f"a Prompt carries {size} characters; the cap is {MAX_PROMPT_CHARS}")
    if p.choices is not None and (len(p.choices) > MAX_CHOICES or max(map(len, p.choices)) > MAX_CHOICE_CHARS):
        raise ValueError(f"choices are capped at {MAX_CHOICES} strings of at most {MAX_CHOICE_CHARS} characters")
