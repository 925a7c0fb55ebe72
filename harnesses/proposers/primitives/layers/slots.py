"""The slots of a layer: names a primitive fills with Python text when it renders the layer.

The values here only let the layer modules import (a class body runs at import); a rendered layer
never carries them. A comment that is just ``# SLOT`` is a slot too.
"""
# An episode's turn cap after the layer (``max_turns``).
TURNS = 4
# An episode's token budget after the layer (``token_budget``).
BUDGET = 1024
# The domain's answer format: a regular expression a parsable answer matches, the assistant
# prefill that opens an answer, the stop string that closes it, the tokens an answer needs.
ANSWER_PATTERN = r"<answer>.*?</answer>"
ANSWER_PREFIX = "<answer>"
ANSWER_STOP = "</answer>"
ANSWER_TOKENS = 32
# The user message that asks for the answer in the format.
NUDGE = "Now give the answer in the required format."
# The request that ends a retry message.
ASK = "Answer again."
# The longest string a choice may hold (the contract's cap less the closing tag).
LONGEST = 500
# A tool argument the layer sets on every search, its value, and why (a comment).
SEARCH_ARG = "top_k"
SEARCH_VALUE = 3
WHY = "why this value"
