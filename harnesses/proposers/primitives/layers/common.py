"""Layers every domain shares: a nudge for the answer, the answer prefix on the last turn, and
twice the tokens per turn."""
import dataclasses
import re

from harnesses.contract import BaseHarness as Harness
from harnesses.contract import Finish, Prompt
from harnesses.proposers.primitives.layers.slots import (
    ANSWER_PATTERN,
    ANSWER_PREFIX,
    ANSWER_STOP,
    ANSWER_TOKENS,
    BUDGET,
    NUDGE,
    TURNS,
)


class FormatNudge(Harness):
    max_turns = TURNS
    nudge_answer = re.compile(ANSWER_PATTERN)
    nudge_text = NUDGE
    nudge_sent = False
    nudge_turns = 0
    nudge_last = ""

    def act(self, completion):
        self.nudge_turns += 1
        self.nudge_last = completion
        return self.nudge_or(super().act(completion))

    def observe(self, observation):
        return self.nudge_or(super().observe(observation))

    def nudge_or(self, action):
        # an episode about to end without a parsable answer asks for it once, if a turn is left;
        # the nudge turn is the answer turn, so it opens with the answer tag itself (an
        # answer_prefix layer below this one cannot see a turn this layer adds)
        if (isinstance(action, Finish) and not self.nudge_sent and self.nudge_turns < self.max_turns
                and not self.nudge_answer.search(self.nudge_last)):
            self.nudge_sent = True
            return Prompt(messages=[{"role": "user", "content": self.nudge_text}], prefix=ANSWER_PREFIX,
                          stop=[ANSWER_STOP], max_new_tokens=ANSWER_TOKENS)
        return action


class AnswerPrefix(Harness):
    prefill_turns = 0

    def start(self, observation):
        return self.prefill_last(super().start(observation))

    def act(self, completion):
        self.prefill_turns += 1
        return self.prefill_last(super().act(completion))

    def observe(self, observation):
        return self.prefill_last(super().observe(observation))

    def prefill_last(self, action):
        # the last turn the engine allows opens with the answer tag, so it cannot miss the format
        if isinstance(action, Prompt) and self.prefill_turns + 1 >= self.max_turns:
            return dataclasses.replace(action, prefix=ANSWER_PREFIX, stop=[ANSWER_STOP],
                                       max_new_tokens=min(action.max_new_tokens, ANSWER_TOKENS))
        return action


class MoreTokens(Harness):
    token_budget = BUDGET

    def start(self, observation):
        return self.longer_turn(super().start(observation))

    def act(self, completion):
        return self.longer_turn(super().act(completion))

    def observe(self, observation):
        return self.longer_turn(super().observe(observation))

    def longer_turn(self, action):
        if isinstance(action, Prompt):
            return dataclasses.replace(action, max_new_tokens=min(2 * action.max_new_tokens, self.token_budget))
        return action
