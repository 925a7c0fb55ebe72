"""A chess harness that restricts the model's answer to the legal moves (a choice constraint).

The model still chooses the move; the harness only makes an unparseable or illegal answer
impossible, which lets rejection sampling find solved puzzles even for a very small model.
"""
from harnesses.contract import BaseHarness, Call, Finish, Prompt


def render(observation):
    return (
        f"Side to move: {observation['side_to_move']}\n"
        f"FEN: {observation['fen']}\n"
        f"Legal moves (SAN): {' '.join(observation['legal_san'])}\n"
        "Reply with the best move in UCI notation."
    )


class Harness(BaseHarness):
    max_turns = 9
    token_budget = 256

    def start(self, observation):
        return self.ask(observation, [{"role": "system", "content": "You are solving a chess puzzle."}])

    def act(self, completion):
        return Call("move", {"move": completion.strip()})

    def observe(self, observation):
        if observation.get("event") == "correct":
            return self.ask(observation, [])
        return Finish()

    def ask(self, observation, messages):
        messages = messages + [{"role": "user", "content": render(observation)}]
        return Prompt(messages=messages, choices=list(observation["legal_uci"]), max_new_tokens=8)
