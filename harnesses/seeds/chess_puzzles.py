"""h0 for chess_puzzles: the position with a flat list of legal UCI moves; one move in <move> tags.

One retry after an answer with no move in it, one after an illegal move; a legal wrong move ends
the episode (the environment decides that). After a correct move the new position is shown.
"""
import re

from harnesses.contract import BaseHarness, Call, Finish, Prompt

MOVE_TAG = re.compile(r"<move>(.*?)</move>", re.S | re.I)
BARE_UCI = re.compile(r"\b([a-h][1-8][a-h][1-8][qrbn]?)\b")
SYSTEM = (
    "You are solving a chess puzzle.\n"
    "Play one legal move for the side to move, using only the information shown.\n"
    "Give exactly one move."
)
ASK = "Answer with a single move in UCI notation inside <move></move> tags, with no explanation."


def parse_move(text):
    """The last <move> tag's content; else the one distinct bare UCI token; else None."""
    tags = MOVE_TAG.findall(text)
    if tags:
        return tags[-1].strip() or None
    tokens = set(BARE_UCI.findall(text))
    return tokens.pop() if len(tokens) == 1 else None


def render(observation):
    return (
        f"Side to move: {observation['side_to_move']}\n"
        f"FEN: {observation['fen']}\n"
        f"Legal moves: {' '.join(observation['legal_uci'])}\n"
        f"{ASK}"
    )


class Harness(BaseHarness):
    max_turns = 9
    token_budget = 512
    turn_tokens = 64

    def __init__(self):
        self.format_retries = 1
        self.illegal_retries = 1

    def start(self, observation):
        return self.prompt([{"role": "system", "content": SYSTEM},
                            {"role": "user", "content": render(observation)}])

    def act(self, completion):
        move = parse_move(completion)
        if move is None:
            return self.format_retry("I could not find a move in your answer.")
        return Call("move", {"move": move})

    def observe(self, observation):
        event = observation.get("event")
        if event == "correct":
            reply = observation["last_opponent_move"]
            text = f"Correct. The opponent replied {reply['uci']}.\n{render(observation)}"
            return self.prompt([{"role": "user", "content": text}])
        if event == "illegal" and self.illegal_retries > 0:
            self.illegal_retries -= 1
            legal = " ".join(observation["legal_uci"])
            text = f"{observation['move']} is not a legal move. Choose one of: {legal}.\n{ASK}"
            return self.prompt([{"role": "user", "content": text}])
        if event == "malformed":
            return self.format_retry(f"{observation['move']!r} is not a move.")
        return Finish()

    def format_retry(self, problem):
        if self.format_retries <= 0:
            return Finish()
        self.format_retries -= 1
        return self.prompt([{"role": "user", "content": f"{problem} {ASK}"}])

    def prompt(self, messages):
        return Prompt(messages=messages, max_new_tokens=self.turn_tokens, stop=["</move>"])
