"""The one rollout engine: many episodes of one harness at once.

RSFT sampling, harness scoring and test evaluation all call ``Engine.run``. Two drivers, the
same records:

- **Turn by turn** (the in-process transformers engine): each turn, every live episode's context
  goes to the backend in one batch, then the harness hooks of all of them go to the sandbox worker
  in one batch; tool calls go to the trusted environments.
- **Per episode** (a server backend that answers each request on its own, ``backend.per_episode``):
  an episode goes on as soon as its own turn is back, so its hooks and tools run while the other
  episodes generate, and a turn's slowest episode holds up no one. Each request carries its own
  seed, so the order changes no tokens.

Every rollout records the exact token ids the model saw and produced and a mask that is 1 only on
tokens the model generated.
"""
from __future__ import annotations

import uuid
from concurrent.futures import FIRST_COMPLETED, Future, wait

from domains.base import string_args
from domains.leaks import caused_by_harness
from harnesses.contract import HARD_MAX_TURNS, HARD_TOKEN_BUDGET, Call, Finish, Prompt, from_wire
from harnesses.sandbox import HarnessSandbox, Limits, SandboxError
from whale.ids import harness_id, rollout_seed
from whale.rollout.backends.base import Backend, GenRequest, GenResult, Sampling
from whale.rollout.chat import ChatFormat
from whale.rollout.episode import Episode, as_text
from whale.rollout.progress import Progress
from whale.types import Example, Rollout, RolloutContext


class Engine:
    """Runs episodes for a (backend, domain) pair; one instance per phase is enough."""

    def __init__(self, backend: Backend, domain, sampling: Sampling, limits: Limits | None = None,
                 per_episode: bool = True):
        self.backend, self.domain, self.sampling = backend, domain, sampling
        self.limits = limits or Limits()
        # only a backend that answers requests one by one (a server) can let episodes go on alone
        self.per_episode = per_episode and backend.concurrent
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
            (self._drive_each if self.per_episode else self._drive)(sandbox, episodes, bar)
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

    def _start(self, sandbox: HarnessSandbox, episodes: list[Episode]) -> None:
        for ep in episodes:
            ep.env = self.domain.environment(ep.example)
        first = [ep.env.reset() for ep in episodes]
        for ep, obs in zip(episodes, first, strict=True):
            ep.events.append(("env", as_text(obs)))
        starts = sandbox.calls([(i, "start", obs) for i, obs in enumerate(first)])
        for ep, (ok, payload) in zip(episodes, starts, strict=True):
            if ok:
                ok, payload = self._budget(ep, payload)
            self._apply(ep, ok, payload, first=True)

    def _hooks(self, sandbox: HarnessSandbox, episodes: list[Episode], turned: list[int]) -> None:
        """``act`` on the turns just generated, then ``observe`` on what their tools returned, each
        hook once for all of ``turned`` (one round trip to the sandbox worker)."""
        turned = [i for i in turned if episodes[i].live]
        acts = sandbox.calls([(i, "act", episodes[i].messages[-1]["content"]) for i in turned])
        observe = []
        for i, (ok, payload) in zip(turned, acts, strict=True):
            obs = self._apply(episodes[i], ok, payload)
            if obs is not None:
                observe.append((i, "observe", obs))
        for (i, _, _), (ok, payload) in zip(observe, sandbox.calls(observe), strict=True):
            self._apply(episodes[i], ok, payload)

    def _release_ended(self, episodes: list[Episode], released: set[str]) -> None:
        over = [ep.session for ep in episodes if not ep.live and ep.session not in released]
        self.backend.release(over)
        released.update(over)

    def _drive(self, sandbox: HarnessSandbox, episodes: list[Episode], bar: Progress) -> None:
        self._start(sandbox, episodes)
        turns, released = 0, set()
        while True:
            live = [i for i, ep in enumerate(episodes) if ep.live]
            bar.update(len(episodes) - len(live), turns)
            self._release_ended(episodes, released)
            if not live:
                return
            bar.generating(len(live))
            eps = [episodes[i] for i in live]
            for ep, res in zip(eps, self.backend.generate([self._request(ep) for ep in eps], self.sampling),
                               strict=True):
                self._take(ep, res)
            turns += 1
            self._hooks(sandbox, episodes, live)

    def _drive_each(self, sandbox: HarnessSandbox, episodes: list[Episode], bar: Progress) -> None:
        self._start(sandbox, episodes)
        pending: dict[Future, int] = {}
        released: set[str] = set()

        def launch(idx: list[int]) -> None:
            futures = self.backend.submit([self._request(episodes[i]) for i in idx], self.sampling)
            pending.update(zip(futures, idx, strict=True))

        try:
            launch([i for i, ep in enumerate(episodes) if ep.live])
            while pending:
                bar.update(sum(not ep.live for ep in episodes), max(ep.turns for ep in episodes))
                bar.generating(len(pending))
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                got = {pending.pop(f): f for f in done}
                turned = sorted(got)
                for i in turned:  # in episode order: a failed request raises, the rest are cancelled below
                    self._take(episodes[i], got[i].result())
                self._hooks(sandbox, episodes, turned)
                self._release_ended(episodes, released)
                launch([i for i in turned if episodes[i].live])
            bar.update(sum(not ep.live for ep in episodes), max(ep.turns for ep in episodes))
        finally:  # an error (a dead server, a broken sandbox) leaves nothing queued behind it
            for f in pending:
                f.cancel()

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

    def _request(self, ep: Episode) -> GenRequest:
        """The episode's next turn: its whole context, the prompt's limits clamped to the budgets."""
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
        return GenRequest(ep.ids, limit, ep.seed + 7919 * ep.turns, list(p.stop), p.choices,
                          session=ep.session, group=ep.example.id)

    def _take(self, ep: Episode, res: GenResult) -> None:
        """The generated turn into the episode's context and messages."""
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
            ep.events.append(("model", as_text(action.args)))  # the model's, checked above
            obs = ep.env.step(action)
            # output of what the model copied from the harness's own text is the harness's
            ep.events.append(("harness" if copied else "env", as_text(obs.data)))
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
