"""chess_puzzles primitives: a move tag prefilled on every turn, a choice constraint over the
legal moves, grouped and annotated move lists, the board diagram, lenient move parsing and more
retries after malformed or illegal answers.

Facts used (domains/chess_puzzles/notes.md): every observation carries ``legal_uci`` and
``legal_san`` (same moves, same order; SAN marks captures x, checks +, mates #), ``board``
(ASCII), ``event`` (start, correct, illegal, malformed) and ``move``; ``Call("move", {"move"})``
takes UCI or SAN. The harness may format and group the environment's lists and restrict output
to them; it may not generate or evaluate moves itself.
"""
from __future__ import annotations

from harnesses.proposers.primitives.common import DomainInfo, Edit, Primitive, layer
from harnesses.proposers.primitives.edit import quote

INFO = DomainInfo(
    name="chess_puzzles",
    marker="<move>",
    answer_pattern=r"(?is)<move>\s*\S+?\s*</move>",
    answer_prefix="<move>",
    answer_stop="</move>",
    answer_tokens=12,
    nudge="Now give only your move inside <move></move> tags.",
    checklist="Before answering, check that your move is in the list of legal moves.",
    reminder="Write only the move inside the tags, for example <move>e2e4</move>.",
    tool_hint="Look at checks first, then captures, then the other moves.",
    tool_expected=False,
    answer_style="A move is its from-square and to-square, like g1f3, and must be one of the legal moves.",
)
# Common primitives the chess ones replace (every chess turn is an answer turn, not just the last).
REPLACES = ("answer_prefix",)


def track_position(attr: str, wrap: str = "") -> str:
    """Hook bodies that keep the latest observation with legal moves in ``self.<attr>``; with
    ``wrap``, every Prompt returned passes through that method."""
    call = (lambda inner: f"self.{wrap}({inner})") if wrap else (lambda inner: inner)
    return f"""
        {attr} = None

        def start(self, observation):
            self.{attr} = observation
            return {call("super().start(observation)")}

        def observe(self, observation):
            if observation.get("legal_uci"):
                self.{attr} = observation
            return {call("super().observe(observation)")}
"""


def move_prefix(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, r'''
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
        ''', ("dataclasses", "Prompt"))


def legal_choices(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, track_position("choice_position", "only_legal") + r'''
        def act(self, completion):
            return self.only_legal(super().act(completion))

        def only_legal(self, action):
            # the turn's output must be one legal move, closed by its tag: never malformed or illegal
            legal = (self.choice_position or {}).get("legal_uci") or []
            if isinstance(action, Prompt) and legal:
                return dataclasses.replace(action, prefix="<move>", stop=[],
                                           choices=[move + "</move>" for move in legal])
            return action
        ''', ("dataclasses", "Prompt"))


def _move_list_layer(source: str, p: Primitive, attr: str, method: str, helper: str) -> Edit:
    """A layer that shows the legal moves as ``helper`` lists them, in place of the flat list."""
    return layer(source, p, track_position(attr, method) + r'''
        def act(self, completion):
            return self.$method(super().act(completion))

        def $method(self, action):
            position = self.$attr or {}
            uci, san = position.get("legal_uci") or [], position.get("legal_san") or []
            messages = [dict(m) for m in action.messages] if isinstance(action, Prompt) else []
            users = [m for m in messages if m["role"] == "user"]
            if users and uci and len(uci) == len(san):
                flat, block = " ".join(uci), self.$helper(uci, san)
                text = users[-1]["content"]
                # the new list replaces the flat one where the harness printed it, else it is added
                users[-1]["content"] = text.replace(flat, "\n" + block, 1) if flat in text else text + "\n" + block
                return dataclasses.replace(action, messages=messages)
            return action
        ''' + HELPERS[helper], ("dataclasses", "Prompt"), attr=attr, method=method, helper=helper)


HELPERS = {
    "grouped_list": r'''
        piece_names = {"K": "King", "O": "King", "Q": "Queen", "R": "Rook", "B": "Bishop", "N": "Knight"}

        def grouped_list(self, uci, san):
            lines = []
            for piece in ("King", "Queen", "Rook", "Bishop", "Knight", "Pawn"):
                moves = [f"{u} ({s})" for u, s in zip(uci, san) if self.piece_names.get(s[:1], "Pawn") == piece]
                if moves:
                    lines.append(f"{piece}: " + ", ".join(moves))
            return "\n".join(lines)
        ''',
    "annotated_list": r'''
        taken_names = {"p": "pawn", "n": "knight", "b": "bishop", "r": "rook", "q": "queen"}

        def annotated_list(self, uci, san):
            groups = {"Checkmates (#)": [], "Checks (+)": [], "Captures (x)": [], "Other moves": []}
            rows = [row.split() for row in str((self.$attr or {}).get("board") or "").splitlines()]
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
        ''',
}


def grouped_moves(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return _move_list_layer(source, p, "grouped_position", "group_moves", "grouped_list")


def annotated_moves(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return _move_list_layer(source, p, "annotated_position", "annotate_moves", "annotated_list")


def board_diagram(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, track_position("board_position", "add_board") + r'''
        def add_board(self, action):
            board = (self.board_position or {}).get("board")
            messages = [dict(m) for m in action.messages] if isinstance(action, Prompt) else []
            users = [m for m in messages if m["role"] == "user"]
            # the diagram shows where the pieces stand, which a FEN string hides from a small model
            if users and board:
                users[-1]["content"] += "\n\nBoard (white in capitals, rank 8 at the top):\n" + board
                return dataclasses.replace(action, messages=messages)
            return action
        ''', ("dataclasses", "Prompt"))


def lenient_move(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, track_position("lenient_position") + r'''
        lenient_tags = re.compile(r"<move>(.*?)(?:</move>|$$)", re.S | re.I)
        lenient_token = re.compile(r"[A-Za-z][A-Za-z0-9=+#-]*")

        def act(self, completion):
            position = self.lenient_position or {}
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
        ''', ("re", "Call"))


def more_retries(source: str, info: DomainInfo, p: Primitive) -> Edit:
    return layer(source, p, r'''
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
                return Prompt(messages=[{"role": "user", "content": problem + " " + $ask}],
                              max_new_tokens=64, stop=["</move>"])
            return action
        ''', ("Prompt", "Finish"), ask=quote("Answer with one legal move inside <move></move> tags."))


PRIMITIVES = (
    Primitive("move_prefix", "parsing", "every turn is prefilled with <move> and stops at </move>, so "
              "each answer is exactly one move tag", ("not_formatted", "truncated"), 1.0, move_prefix),
    Primitive("legal_choices", "parsing", "a choice constraint over the legal moves (UCI) makes every "
              "answer a legal move", ("not_formatted", "tool_error", "wrong"), 1.1, legal_choices),
    Primitive("grouped_moves", "observation", "the legal moves grouped by piece, UCI with SAN, are "
              "easier to choose from than a flat list", ("wrong", "tool_error"), 0.6, grouped_moves),
    Primitive("annotated_moves", "observation", "the legal moves sorted into mates, checks, captures "
              "and others (from the SAN symbols), each capture naming the piece it takes (from the "
              "board), point at forcing moves and material", ("wrong",), 0.8, annotated_moves),
    Primitive("board_diagram", "observation", "the ASCII board shows where the pieces stand",
              ("wrong",), 0.4, board_diagram),
    Primitive("lenient_move", "parsing", "the last legal move named in the answer (UCI or SAN, tagged "
              "or not) is played instead of asking again", ("not_formatted", "tool_error"), 0.7, lenient_move),
    Primitive("more_retries", "retries", "two more retries after malformed or illegal answers",
              ("not_formatted", "tool_error"), 0.6, more_retries),
)
