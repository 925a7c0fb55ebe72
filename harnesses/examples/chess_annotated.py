"""A chess harness for a small model: the legal moves sorted into mates, checks and captures, and
the answer a choice among them.

The environment's SAN already marks mates (#), checks (+) and captures (x), and its board says
which piece stands on a capture's target square; a 135M model does not read those off a flat list
of 30 moves, so the list is regrouped and each capture names what it takes. Nothing is computed
that the observation does not state, and the model still picks the move: the choice constraint
only rules out unparseable and illegal answers.
"""
import re

from harnesses.contract import BaseHarness, Call, Finish, Prompt

MOVE_TAG = re.compile(r"<move>(.*?)</move>", re.S | re.I)
PIECES = {"p": "pawn", "n": "knight", "b": "bishop", "r": "rook", "q": "queen"}
SYSTEM = (
    "You are solving a chess puzzle. Exactly one move is right: it checkmates, or it wins material.\n"
    "Answer with one legal move in UCI notation inside <move></move> tags."
)


def taken_piece(board, uci):
    """What stands on the target square of ``uci`` on the environment's ASCII board (rank 8
    first); a pawn when the square is empty (en passant) or the board is missing."""
    rows = [row.split() for row in str(board or "").splitlines()]
    if len(rows) != 8 or any(len(row) != 8 for row in rows):
        return "pawn"
    piece = rows[8 - int(uci[3])][ord(uci[2]) - ord("a")].lower()
    return PIECES.get(piece, "pawn")


def move_groups(observation):
    """The legal moves as lines of ``uci (SAN)`` grouped by what SAN says they do."""
    groups = {"Checkmates": [], "Checks": [], "Captures": [], "Other moves": []}
    for uci, san in zip(observation["legal_uci"], observation["legal_san"], strict=True):
        label = f"{uci} ({san}, takes {taken_piece(observation.get('board'), uci)})" if "x" in san else f"{uci} ({san})"
        if san.endswith("#"):
            groups["Checkmates"].append(label)
        elif san.endswith("+"):
            groups["Checks"].append(label)
        else:
            groups["Captures" if "x" in san else "Other moves"].append(label)
    return "\n".join(f"{kind}: {', '.join(moves)}" for kind, moves in groups.items() if moves)


def render(observation):
    return (f"Side to move: {observation['side_to_move']}\n"
            f"FEN: {observation['fen']}\n"
            f"Legal moves:\n{move_groups(observation)}")


class Harness(BaseHarness):
    max_turns = 9
    token_budget = 256
    turn_tokens = 12

    def start(self, observation):
        return self.ask(observation, [{"role": "system", "content": SYSTEM},
                                      {"role": "user", "content": render(observation)}])

    def act(self, completion):
        # the turn's text is "<move>" plus one of the choices, so the tag is always there
        tags = MOVE_TAG.findall(completion)
        return Call("move", {"move": tags[-1].strip()}) if tags else Finish("no move")

    def observe(self, observation):
        if observation.get("event") != "correct":  # a choice is always legal: only "correct" goes on
            return Finish()
        reply = observation["last_opponent_move"]["uci"]
        return self.ask(observation, [{"role": "user", "content": f"Correct. The opponent replied {reply}.\n"
                                                                  f"{render(observation)}"}])

    def ask(self, observation, messages):
        choices = [move + "</move>" for move in observation["legal_uci"]]
        return Prompt(messages=messages, max_new_tokens=self.turn_tokens, prefix="<move>", choices=choices)
