"""The chess environment: the real board, one tool ``move``, scripted opponent replies.

The solver's moves are checked with python-chess on the real board: a legal move that is not
the reference move ends the episode (except another mate where the line ends in mate); a correct
move is pushed together with the scripted reply.
Malformed and illegal moves change nothing and end nothing: retries are the harness's policy.
"""
from __future__ import annotations

import re

import chess

from domains.base import Environment, Observation
from harnesses.contract import Call
from whale.types import Example

UCI = re.compile(r"[a-h][1-8][a-h][1-8][qrbn]?", re.I)
WORD = re.compile(r"[A-Za-z0-9][\w=+#-]*")
TOOL_HELP = "the only tool is move(move: str), a move in UCI (e2e4, e7e8q) or SAN (Nf3, O-O, exd5)"


def parse_move(board: chess.Board, text: str) -> tuple[chess.Move | None, str, str]:
    """``(move, event, reason)``: event is ``ok``, ``illegal`` or ``malformed``."""
    text = text.strip()
    if UCI.fullmatch(text):
        try:
            move = board.parse_uci(text.lower())
        except ValueError:
            return None, "illegal", f"{text} is not a legal move in this position"
        return move, "ok", ""
    try:
        move = board.parse_san(text)
    except chess.AmbiguousMoveError:
        return None, "illegal", f"{text} is ambiguous: more than one piece can make it"
    except chess.IllegalMoveError:
        return None, "illegal", f"{text} is not a legal move in this position"
    except ValueError:
        return None, "malformed", f"{text!r} is not a move in UCI or SAN notation"
    if not move:  # SAN's null move "--" parses, but passing is not a chess move
        return None, "illegal", "a null move is not legal"
    return move, "ok", ""


class ChessEnvironment(Environment):
    """One puzzle: the start position, the reference line, and what the solver has played."""

    def __init__(self, example: Example):
        self.example = example
        self.line = list(example.gold["moves"])
        self.reset()

    def reset(self) -> dict:
        self.board = chess.Board(self.example.public["fen"])
        self.ply = 0
        self.moves_played: list[str] = []
        self.last_opponent: dict | None = None
        self.illegal = self.malformed = self.submitted = 0
        self.wrong_move: str | None = None
        self.solved = self.done = False
        return self.observation("start")

    def step(self, call: Call) -> Observation:
        """Play one move. Bad calls come back as ``{"error": ...}`` data; nothing is raised."""
        problem = self._check(call)
        if problem:
            return Observation({"error": problem}, done=self.done)
        text = call.args["move"]
        move, event, reason = parse_move(self.board, text)
        if event == "malformed":
            self.malformed += 1
            return Observation(self.observation("malformed", move=text, reason=reason))
        self.submitted += 1
        if event == "illegal":
            self.illegal += 1
            return Observation(self.observation("illegal", move=text, reason=reason))
        uci = move.uci()
        if uci != self.line[self.ply] and not self._other_mate(move):
            self.wrong_move, self.done = uci, True
            return Observation(self.observation("wrong", move=uci), done=True)
        self._push(move)
        if self.ply < len(self.line):
            reply = chess.Move.from_uci(self.line[self.ply])
            self.last_opponent = {"uci": reply.uci(), "san": self.board.san(reply)}
            self._push(reply)
        if self.ply == len(self.line):
            self.solved = self.done = True
            return Observation(self.observation("solved", move=uci), done=True)
        return Observation(self.observation("correct", move=uci))

    def _other_mate(self, move: chess.Move) -> bool:
        """Where the reference line ends in mate, any mate on that last ply solves the puzzle (the
        Lichess rule): the solver found a win the line did not list."""
        if self.ply != len(self.line) - 1:
            return False
        after = self.board.copy(stack=False)
        after.push(chess.Move.from_uci(self.line[self.ply]))
        if not after.is_checkmate():
            return False
        after = self.board.copy(stack=False)
        after.push(move)
        return after.is_checkmate()

    def authored(self, call: Call, completion: str) -> str | None:
        """The move must be one the model named this turn, in either notation: the harness may
        translate the model's SAN to UCI or pick its move out of a sentence, not choose one. A call
        that plays nothing (malformed, illegal, over) needs no author."""
        if self._check(call):
            return None
        move, _, _ = parse_move(self.board, call.args["move"])
        if move is None:
            return None
        for token in WORD.findall(completion):
            if parse_move(self.board, token.rstrip("+#!?"))[0] == move:
                return None
        return f"the move {move.uci()} is not among the moves the model wrote this turn"

    def final_state(self) -> dict:
        return {"moves_played": list(self.moves_played), "solved": self.solved,
                "checkmate": self.board.is_checkmate(),
                "illegal": self.illegal, "malformed": self.malformed,
                "submitted": self.submitted, "wrong_move": self.wrong_move}

    def observation(self, event: str, **extra) -> dict:
        """The public view of the board (never the reference line), plus the event."""
        legal = list(self.board.legal_moves)
        return {
            "event": event, **extra,
            "type": self.example.public["type"],
            "n_solver_moves": self.example.public["n_solver_moves"],
            "fen": self.board.fen(),
            "board": str(self.board),
            "side_to_move": "white" if self.board.turn == chess.WHITE else "black",
            "legal_uci": [m.uci() for m in legal],
            "legal_san": [self.board.san(m) for m in legal],
            "last_opponent_move": dict(self.last_opponent) if self.last_opponent else None,
            "moves_played": list(self.moves_played),
            "move_number": (self.ply + 1) // 2 + 1,  # which solver move of the line is asked now
        }

    def _push(self, move: chess.Move) -> None:
        self.moves_played.append(move.uci())
        self.board.push(move)
        self.ply += 1

    def _check(self, call: Call) -> str | None:
        if not isinstance(call, Call) or call.tool != "move":
            return f"unknown tool {getattr(call, 'tool', call)!r}; {TOOL_HELP}"
        if not isinstance(call.args, dict) or set(call.args) != {"move"}:
            return f"bad arguments {call.args!r}; {TOOL_HELP}"
        if not isinstance(call.args["move"], str):
            return f"the move must be a string, got {type(call.args['move']).__name__}; {TOOL_HELP}"
        if self.done:
            return "the episode is over: the puzzle was solved or a wrong move ended it"
        return None
