"""chess_puzzles layers: the move tag on every turn, a choice over the legal moves, grouped and
annotated move lists, the board diagram, lenient move parsing and more retries.

``Position`` and ``WrappedPosition`` keep the latest observation that lists legal moves in
``self.tracked_position``; a primitive renames it (and ``wrap_prompt``) per layer, since layers of
one harness share one instance.
"""
import dataclasses
import re

from harnesses.contract import BaseHarness as Harness
from harnesses.contract import Call, Finish, Prompt
from harnesses.proposers.primitives.layers.slots import ASK


class MovePrefix(Harness):
    def start(self, observation):
        return self.open_move_tag(super().start(observation))

    def act(self, completion):
        return self.open_move_tag(super().act(completion))

    def observe(self, observation):
        return self.open_move_tag(super().observe(observation))

    def open_move_tag(self, action):
        # every turn continues "<move>" and stops at "</move>": the answer is always one tag
        if isinstance(action, Prompt):
            return dataclasses.replace(action, prefix="<move>", stop=["</move>"],
                                       max_new_tokens=min(action.max_new_tokens, 12))
        return action


class Position(Harness):
    tracked_position = None

    def start(self, observation):
        self.tracked_position = observation
        return super().start(observation)

    def observe(self, observation):
        if observation.get("legal_uci"):
            self.tracked_position = observation
        return super().observe(observation)


class WrappedPosition(Harness):
    tracked_position = None

    def start(self, observation):
        self.tracked_position = observation
        return self.wrap_prompt(super().start(observation))

    def observe(self, observation):
        if observation.get("legal_uci"):
            self.tracked_position = observation
        return self.wrap_prompt(super().observe(observation))


class LegalChoices(WrappedPosition):
    def act(self, completion):
        return self.wrap_prompt(super().act(completion))

    def wrap_prompt(self, action):
        # the turn's output must be one legal move, closed by its tag: never malformed or illegal
        legal = (self.tracked_position or {}).get("legal_uci") or []
        if isinstance(action, Prompt) and legal:
            return dataclasses.replace(action, prefix="<move>", stop=[],
                                       choices=[move + "</move>" for move in legal])
        return action


class MoveList(WrappedPosition):
    """The legal moves as ``list_block`` lists them, in place of the flat list."""

    def act(self, completion):
        return self.wrap_prompt(super().act(completion))

    def wrap_prompt(self, action):
        position = self.tracked_position or {}
        uci, san = position.get("legal_uci") or [], position.get("legal_san") or []
        messages = [dict(m) for m in action.messages] if isinstance(action, Prompt) else []
        users = [m for m in messages if m["role"] == "user"]
        if users and uci and len(uci) == len(san):
            flat, block = " ".join(uci), self.list_block(uci, san)
            text = users[-1]["content"]
            # the new list replaces the flat one where the harness printed it, else it is added
            users[-1]["content"] = text.replace(flat, "\n" + block, 1) if flat in text else text + "\n" + block
            return dataclasses.replace(action, messages=messages)
        return action


class GroupedMoves(MoveList):
    piece_names = {"K": "King", "O": "King", "Q": "Queen", "R": "Rook", "B": "Bishop", "N": "Knight"}

    def list_block(self, uci, san):
        lines = []
        for piece in ("King", "Queen", "Rook", "Bishop", "Knight", "Pawn"):
            moves = [f"{u} ({s})" for u, s in zip(uci, san) if self.piece_names.get(s[:1], "Pawn") == piece]
            if moves:
                lines.append(f"{piece}: " + ", ".join(moves))
        return "\n".join(lines)


class AnnotatedMoves(MoveList):
    taken_names = {"p": "pawn", "n": "knight", "b": "bishop", "r": "rook", "q": "queen"}

    def list_block(self, uci, san):
        groups = {"Checkmates (#)": [], "Checks (+)": [], "Captures (x)": [], "Other moves": []}
        rows = [row.split() for row in str((self.tracked_position or {}).get("board") or "").splitlines()]
        for u, s in zip(uci, san):
            label = f"{u} ({s})"
            if "x" in s and len(rows) == 8 and all(len(row) == 8 for row in rows):
                # the piece on the target square of the environment's board (empty: en passant)
                taken = rows[8 - int(u[3])][ord(u[2]) - ord("a")].lower()
                label = f"{u} ({s}, takes {self.taken_names.get(taken, 'pawn')})"
            # read off the SAN symbols the environment provides: nothing is computed here
            if s.endswith("#"):
                kind = "Checkmates (#)"
            elif s.endswith("+"):
                kind = "Checks (+)"
            else:
                kind = "Captures (x)" if "x" in s else "Other moves"
            groups[kind].append(label)
        return "\n".join(f"{kind}: " + ", ".join(moves) for kind, moves in groups.items() if moves)


class BoardDiagram(WrappedPosition):
    def wrap_prompt(self, action):
        board = (self.tracked_position or {}).get("board")
        messages = [dict(m) for m in action.messages] if isinstance(action, Prompt) else []
        users = [m for m in messages if m["role"] == "user"]
        # the diagram shows where the pieces stand, which a FEN string hides from a small model
        if users and board:
            users[-1]["content"] += "\n\nBoard (white in capitals, rank 8 at the top):\n" + board
            return dataclasses.replace(action, messages=messages)
        return action


class LenientMove(Position):
    lenient_tags = re.compile(r"<move>(.*?)(?:</move>|$)", re.S | re.I)
    lenient_token = re.compile(r"[A-Za-z][A-Za-z0-9=+#-]*")

    def act(self, completion):
        position = self.tracked_position or {}
        uci = {m.lower(): m for m in position.get("legal_uci") or []}
        san = {m.rstrip("+#"): m for m in position.get("legal_san") or []}
        tags = self.lenient_tags.findall(completion)
        named = []
        for token in self.lenient_token.findall(tags[-1] if tags else completion):
            token = token.rstrip("+#")
            if token in san or token.lower() in uci:
                named.append(san.get(token) or uci[token.lower()])
        # only the last legal move named counts, in UCI or SAN, with or without + and #
        if named:
            return Call("move", {"move": named[-1]})
        return super().act(completion)


class MoreRetries(Harness):
    retries_left = 2
    retry_turns = 0

    def act(self, completion):
        self.retry_turns += 1
        return self.retry_or(super().act(completion), "I could not find a move in your answer.")

    def observe(self, observation):
        problem = observation.get("reason") or "That move cannot be played."
        action = super().observe(observation)
        if observation.get("event") in ("illegal", "malformed"):
            legal = " ".join(observation.get("legal_uci") or [])
            action = self.retry_or(action, f"{problem} Legal moves: {legal}.")
        return action

    def retry_or(self, action, problem):
        # two more chances after the harness's own retries run out, while turns are left
        if isinstance(action, Finish) and self.retries_left > 0 and self.retry_turns < self.max_turns:
            self.retries_left -= 1
            return Prompt(messages=[{"role": "user", "content": problem + " " + ASK}],
                          max_new_tokens=64, stop=["</move>"])
        return action
