"""Incremental chat rendering: token ids for each appended piece of a conversation.

The engine never re-renders a whole conversation. It renders each new piece (the first
messages, a tool result, a nudge, the glue after a model turn) once, appends those ids, and
keeps what the model generated as generated ids. The token sequence a rollout records is then
exactly the sequence the model conditioned on, which is what SFT trains on.
"""
from __future__ import annotations

_PROBE_SYSTEM = {"role": "system", "content": "\u2063"}
_PROBE_TEXT = "\u2062WHALE\u2062"


class ChatFormat:
    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.eos_id = tokenizer.eos_token_id
        base = self._render([_PROBE_SYSTEM])
        turn = self._render([_PROBE_SYSTEM, {"role": "assistant", "content": _PROBE_TEXT}])
        self._base = base
        # What the template writes after an assistant message's text, e.g. "<|im_end|>\n".
        self._after_turn = turn[turn.index(_PROBE_TEXT) + len(_PROBE_TEXT):]
        self._eos_text = tokenizer.decode([self.eos_id])

    def _render(self, messages, generation_prompt: bool = False) -> str:
        return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False) if text else []

    def opening(self, messages: list[dict]) -> list[int]:
        """The first messages of an episode followed by the assistant header."""
        return self.encode(self._render(messages, generation_prompt=True))

    def continuation(self, messages: list[dict]) -> list[int]:
        """Messages appended after a finished assistant turn, then the next assistant header."""
        text = self._render([_PROBE_SYSTEM, *messages], generation_prompt=True)
        if not text.startswith(self._base):
            raise ValueError("the chat template does not render conversations incrementally")
        return self.encode(text[len(self._base):])

    def turn_end(self, generated: list[int]) -> list[int]:
        """Template glue closing an assistant turn (minus the eos the model wrote itself)."""
        glue = self._after_turn
        if generated and generated[-1] == self.eos_id and glue.startswith(self._eos_text):
            glue = glue[len(self._eos_text):]
        return self.encode(glue)

    def text(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=True)
