"""The one rollout engine: many episodes of one harness at once, turn by turn.

RSFT sampling, harness scoring and test evaluation all call ``run_rollouts``. Each turn, every
live episode's context goes to the backend in one batch; the harness hooks of all episodes go to
the sandbox worker in one batch; tool calls go to the trusted environments. Every rollout
records the exact token ids the model saw and produced and a mask that is 1 only on tokens the
model generated.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from domains.base import string_args
from domains.leaks import caused_by_harness
from harnesses.contract import HARD_MAX_TURNS, HARD_TOKEN_BUDGET, Call, Finish, Prompt, from_wire
from harnesses.sandbox import HarnessSandbox, Limits, SandboxError
from whale.ids import harness_id, rollout_seed
from whale.rollout.backends.base import Backend, GenRequest, Sampling
from whale.rollout.chat import ChatFormat
from whale.rollout.progress import Progress
from whale.types import Example, Rollout, RolloutContext


@dataclass
class Episode:
    example: Example
    sample_idx: int
    seed: int
    env: object
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    prompt: Prompt | None = None
    turns: int = 0
    tool_calls: int = 0
    generated: int = 0
    max_turns: int = 1
    token_budget: int = 1
    last_finish: str = ""
    clamped: dict = field(default_factory=dict)  # harness values over an engine cap: name -> [asked, used]
    events: list[tuple[str, str]] = field(default_factory=list)  # (author, text) for the leak check
    completion: str = ""  # what the model wrote in its last turn, without the harness's prefix
    unauthored: str | None = None  # why a tool call of the harness was not the model's action
    stop_reason: str | None = None
    error: str | None = None
    session: str | None = None  # the backend's key for this episode's kept keys and values
    started: float = field(default_factory=time.perf_counter)
    ended: float = 0.0

    @property
    def live(self) -> bool:
        return self.stop_reason is None

    def end(self, reason: str, error: str | None = None) -> None:
        if self.live:
            self.stop_reason, self.error, self.ended = reason, error, time.perf_counter()

    def extend(self, ids: list[int], generated: bool) -> None:
        self.ids += ids
        self.mask += [int(generated)] * len(ids)


class Engine:
    """Runs episodes for a (backend, domain) pair; one instance per phase is enough."""

    def __init__(self, backend: Backend, domain, sampling: Sampling, limits: Limits | None = None):
        self.backend, self.domain, self.sampling = backend, domain, sampling
        self.limits = limits or Limits()
        self.chat = ChatFormat(backend.tokenizer)

    def run(self, source: str, examples: list[Example], k: int, seed: int,
            ctx: RolloutContext | None = None, progress: bool = True, desc: str = "rollouts") -> list[Rollout]:
        ctx = ctx or RolloutContext()
        tag = uuid.uuid4().hex
        pairs = [(ex, s) for ex in examples for s in range(k)]
        # one session per episode, even where a caller passes an example twice
        episodes = [Episode(ex, s, rollout_seed(seed, ex.id, s), None, session=f"{tag}:{n}")
                    for n, (ex, s) in enumerate(pairs)]
        bar = Progress(len(episodes), desc, enabled=progress)
        try:
            sandbox = HarnessSandbox(source, self.limits)
        except SandboxError as e:
            for ep in episodes:
                ep.end("error", str(e))
            bar.close()
            return [self._record(ep, source, ctx) for ep in episodes]
        sandbox.budget(len(episodes))
        try:
            self._drive(sandbox, episodes, bar)
        except SandboxError as e:  # the harness as a whole broke: every unfinished episode is an error
            for ep in episodes:
                ep.end("error", str(e))
        finally:
            self.backend.release([ep.session for ep in episodes])
            sandbox.close()
            bar.close()
            for ep in episodes:
                if ep.env is not None:
                    ep.env.close()
        return [self._record(ep, source, ctx) for ep in episodes]

    def _drive(self, sandbox: HarnessSandbox, episodes: list[Episode], bar: Progress) -> None:
        for ep in episodes:
            ep.env = self.domain.environment(ep.example)
        first = [ep.env.reset() for ep in episodes]
        for ep, obs in zip(episodes, first, strict=True):
            ep.events.append(("env", _text(obs)))
        starts = sandbox.calls([(i, "start", obs) for i, obs in enumerate(first)])
        for ep, (ok, payload) in zip(episodes, starts, strict=True):
            if ok:
                ok, payload = self._budget(ep, payload)
            self._apply(ep, ok, payload, first=True)
        turns, released = 0, set()
        while True:
            live = [i for i, ep in enumerate(episodes) if ep.live]
            bar.update(len(episodes) - len(live), turns)
            over = [ep.session for ep in episodes if not ep.live and ep.session not in released]
            self.backend.release(over)
            released.update(over)
            if not live:
                return
            bar.generating(len(live))
            self._generate([episodes[i] for i in live])
            turns += 1
            acts = sandbox.calls([(i, "act", episodes[i].messages[-1]["content"]) for i in live if episodes[i].live])
            observe = []
            for i, (ok, payload) in zip([i for i in live if episodes[i].live], acts, strict=True):
                obs = self._apply(episodes[i], ok, payload)
                if obs is not None:
                    observe.append((i, "observe", obs))
            for (i, _, _), (ok, payload) in zip(observe, sandbox.calls(observe), strict=True):
                self._apply(episodes[i], ok, payload)

    @staticmethod
    def _budget(ep: Episode, payload) -> tuple[bool, object]:
        """Take the harness's turn and token budgets, clamped to the engine's own caps (recorded)."""
        if not isinstance(payload, dict):
            return False, "start() reply is not an object"
        asked = {"max_turns": payload.pop("max_turns", None), "token_budget": payload.pop("token_budget", None)}
        for name, cap in (("max_turns", HARD_MAX_TURNS), ("token_budget", HARD_TOKEN_BUDGET)):
            value = asked[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                return False, f"{name} must be a positive int, got {value!r}"
            if value > cap:
                ep.clamped[name] = [value, cap]
            setattr(ep, name, min(value, cap))
        return True, payload

    def _generate(self, eps: list[Episode]) -> None:
        requests = []
        for ep in eps:
            p = ep.prompt
            limit = min(p.max_new_tokens, ep.token_budget - ep.generated)
            if p.max_new_tokens > ep.token_budget:
                ep.clamped["max_new_tokens"] = [p.max_new_tokens, ep.token_budget]
            if p.choices:  # a choice must fit whole, whatever the harness asked for
                limit = max(limit, max(len(self.chat.encode(c)) for c in p.choices) + 1)
            room = self.backend.context_len and self.backend.context_len - len(ep.ids)
            if room and limit > room:  # the context ends the turn, as a token limit would
                ep.clamped["context"] = [limit, room]
                limit = room
            requests.append(GenRequest(ep.ids, limit, ep.seed + 7919 * ep.turns, list(p.stop), p.choices,
                                       session=ep.session, group=ep.example.id))
        for ep, res in zip(eps, self.backend.generate(requests, self.sampling), strict=True):
            ep.extend(res.ids, generated=True)
            text = self.chat.text(res.ids)
            ep.events.append(("model", text))
            ep.completion = text
            # The prefix is part of what the model continued, but the harness wrote it: verifiers skip it.
            prefix = {"prefix": ep.prompt.prefix} if ep.prompt.prefix else {}
            ep.messages.append({"role": "assistant", "content": ep.prompt.prefix + text, **prefix})
            ep.extend(self.chat.turn_end(res.ids), generated=False)
            ep.turns += 1
            ep.generated += len(res.ids)
            ep.last_finish = res.finish

    def _apply(self, ep: Episode, ok: bool, payload, first: bool = False):
        """Apply one hook result; return an observation that still needs ``observe``."""
        if not ok:
            ep.end("error", f"harness hook raised:\n{payload}")
            return None
        try:
            action = from_wire(payload)
            if first and not isinstance(action, Prompt):
                raise ValueError("start() must return a Prompt")
        except (TypeError, ValueError) as e:
            ep.end("error", f"harness broke the contract: {e}")
            return None
        if isinstance(action, Finish):
            ep.end(self._answered_reason(ep))
        elif isinstance(action, Call):
            reason = ep.env.authored(action, ep.completion)
            if reason:  # the harness wrote the action: it is not run and the episode earns nothing
                ep.unauthored = reason
                ep.end(self._answered_reason(ep))
                return None
            ep.tool_calls += 1
            copied = caused_by_harness([v for _, v in string_args(action.args)], ep.events)
            ep.events.append(("model", _text(action.args)))  # the model's, checked above
            obs = ep.env.step(action)
            # output of what the model copied from the harness's own text is the harness's
            ep.events.append(("harness" if copied else "env", _text(obs.data)))
            if obs.done:
                ep.end(self._answered_reason(ep))
            else:
                return obs.data
        else:
            self._queue(ep, action, first)
        return None

    def _queue(self, ep: Episode, prompt: Prompt, first: bool) -> None:
        if ep.turns >= ep.max_turns:
            ep.end("turn_cap")
            return
        if ep.generated >= ep.token_budget:
            ep.end("truncated")
            return
        ep.messages += prompt.messages
        written = [m["content"] for m in prompt.messages] + [prompt.prefix] + list(prompt.choices or [])
        ep.events.append(("harness", "\n".join(written)))
        ep.extend(self.chat.opening(prompt.messages) if first else self.chat.continuation(prompt.messages), False)
        ep.extend(self.chat.encode(prompt.prefix), generated=False)
        ep.prompt = prompt
        cap = self.backend.context_len
        if cap and len(ep.ids) >= cap:  # refused here, in tokens, before any backend sees it
            ep.end("error", f"harness broke the contract: the episode's context is {len(ep.ids)} tokens, "
                            f"the model takes {cap}; prompts must leave room for the reply")

    @staticmethod
    def _answered_reason(ep: Episode) -> str:
        # A turn cut off by its token limit means the model never finished what it was saying.
        return "truncated" if ep.last_finish == "length" else "answered"

    def _record(self, ep: Episode, source: str, ctx: RolloutContext) -> Rollout:
        if ep.live:
            ep.end("error", "episode did not finish")
        r = Rollout(
            run_id=ctx.run_id, cycle=ctx.cycle, phase=ctx.phase, step=ctx.step, split=ep.example.split,
            example_id=ep.example.id, sample_idx=ep.sample_idx, harness_id=harness_id(source),
            weights_id=self.backend.weights_id, seed=ep.seed, turns=ep.turns, tool_calls=ep.tool_calls,
            tokens_in=len(ep.ids) - sum(ep.mask), tokens_out=sum(ep.mask), stop_reason=ep.stop_reason,
            error=ep.error, messages=ep.messages, token_ids=ep.ids, mask=ep.mask,
            latency_s=round(ep.ended - ep.started, 4),
        )
        if ep.stop_reason != "error":
            state = ep.env.final_state() if ep.env is not None else {}
            verdict = self.domain.verify(ep.example, ep.messages, state)
            r.reward, r.formatted, r.verdict = float(verdict.reward), bool(verdict.formatted), verdict.details
            reason = self.domain.leak(ep.example, ep.events) if r.reward > 0 else None
            if reason:
                r.reward, r.verdict = 0.0, {**r.verdict, "leak": reason}
            if ep.unauthored:
                r.reward, r.verdict = 0.0, {**r.verdict, "unauthored": ep.unauthored}
        if ep.clamped:
            r.verdict = {**r.verdict, "clamped": ep.clamped}
        return r


def _text(data) -> str:
    """An observation or tool arguments as the text the leak checks search: every value, one per
    line, as written (not JSON, whose escapes would hide a copied line break or quote)."""
    if isinstance(data, dict):
        return "\n".join(_text(v) for v in data.values())
    if isinstance(data, list | tuple):
        return "\n".join(_text(v) for v in data)
    return "" if data is None else str(data)
