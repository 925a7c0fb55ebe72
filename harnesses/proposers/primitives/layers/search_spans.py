"""search_qa layers that constrain a turn to the retrieved passages' names (the choice
constraint): the answer as one of them, and the second search of a two-hop question as one of them.

Candidate spans are names (capitalised words in any script, joined by "of", "the", "de", ...),
numbers and written-out dates (with their year) of the passages, in order of appearance, minus
those the question itself names and minus a sentence's opening word that the passages also write
in lower case; "yes" and "no" come first when the question opens like a yes/no question. The null
policy, uniform over the candidates, measures how much they give away (on the generated harness
split, 0.09 for the answer constraint under the 0.25 limit).

``PassageSpans`` finds the candidate spans; ``span_turns`` counts the turns a layer has seen and
is renamed per layer (layers of one harness share one instance and keep their own counters).
"""
import dataclasses
import re

from harnesses.contract import BaseHarness as Harness
from harnesses.contract import Call, Prompt
from harnesses.proposers.primitives.layers.slots import LONGEST


class PassageSpans(Harness):
    span_months = "January|February|March|April|May|June|July|August|September|October|November|December"
    # a word (any script; "'s" of a possessive dropped), a number, or a date written out
    span_token = re.compile(r"\b(?:\d{1,2} (?:" + span_months + r") \d{3,4}|(?:" + span_months
                            + r") \d{1,2}, \d{3,4}|(?:" + span_months + r") \d{3,4})\b"
                            + r"|\d[\d,.]*\d|\d|[^\W\d_](?:[\w-]|['’](?!s\b)\w)*")
    span_connect = {"of", "the", "de", "la", "von", "van", "du", "del", "da", "di", "le", "y", "bin", "al"}
    span_skip = {"The", "A", "An", "In", "On", "At", "It", "He", "She", "They", "His", "Her", "Its", "This",
                 "That", "Much", "Many", "Title", "Doc"}
    span_yes_no = {"is", "are", "was", "were", "do", "does", "did", "has", "have", "had", "can", "could",
                   "will", "would"}
    span_limit = 48
    # a longer run of capitalised words (a list of titles) would break the contract's cap on a
    # choice's length, and a harness that breaks it is discarded
    span_longest = LONGEST
    span_question = ""
    span_turns = 0

    def start(self, observation):
        self.span_question, self.span_turns = observation.get("question", "").lower(), 0
        return super().start(observation)

    def passage_spans(self, passages):
        """Names, numbers and dates of the passages in order, none that the question names;
        "yes" and "no" first when the question asks for one."""
        texts = [str(p.get(key, "")) for p in passages for key in ("title", "text")]
        # a sentence's capitalised first word that the passages also write in lower case is not a
        # name ("Born in 1875 in Thodafus"); "The Salou River" -> "Salou River"
        common = {w for text in texts for w in re.findall(r"\b[^\W\d_A-Z][\w'-]*", text) if w.islower()}
        words = self.span_question.split()
        found = ["yes", "no"] if words and words[0] in self.span_yes_no else []
        for text in texts:
            for span in self.text_spans(text, common):
                if span not in found and span.lower() not in self.span_question:
                    found.append(span)
        return [span for span in found if len(span) <= self.span_longest][:self.span_limit]

    def text_spans(self, text, common):
        """Runs of capitalised words joined by spaces and connecting words; numbers; dates and
        their year."""
        out, run, joints, end = [], [], [], 0

        def close():
            if run:
                out.append(" ".join(run))
            run.clear()
            joints.clear()

        for match in self.span_token.finditer(text):
            word, tail = match.group(), text[end:match.start()].rstrip()
            # a sentence ends in the gap (tokens never end in . ! ? :), or the text starts here
            opens = tail[-1:] in (".", "!", "?", ":") or (not tail and end == 0)
            end = match.end()
            if tail:  # punctuation between two words ends a name
                close()
            if word[0].isupper() and " " not in word and (
                    run or not (word in self.span_skip or opens and word.lower() in common)):
                run.extend([*joints, word])
                joints.clear()
            elif run and word in self.span_connect:
                joints.append(word)
            else:
                close()
                if " " in word:
                    out += [word, word.split()[-1]]
                elif word[0].isdigit():
                    out.append(word)
        close()
        return out


class AnswerSpans(PassageSpans):
    def act(self, completion):
        self.span_turns += 1
        return super().act(completion)

    def observe(self, observation):
        action = super().observe(observation)
        spans = self.passage_spans(observation.get("passages") or [])
        # the last turn copies one name, date or place of the passages and closes the tag: the
        # answer is always parsable and always a span the passages hold, never a sentence
        if isinstance(action, Prompt) and spans and self.span_turns + 1 >= self.max_turns:
            return dataclasses.replace(action, prefix="<answer>", stop=[],
                                       choices=[span + "</answer>" for span in spans])
        return action


class BridgeChoice(PassageSpans):
    bridge_pending = False

    def observe(self, observation):
        action = super().observe(observation)
        spans = self.passage_spans(observation.get("passages") or [])
        # with two turns left, the model names the entity to look up next among the passage's
        # names: the bridge of a two-hop question ("the author of X" -> the author's own page)
        self.bridge_pending = isinstance(action, Prompt) and bool(spans) and self.span_turns + 2 == self.max_turns
        if self.bridge_pending:
            return dataclasses.replace(action, prefix="<search>", stop=[],
                                       choices=[span + "</search>" for span in spans])
        return action

    def act(self, completion):
        self.span_turns += 1
        bridge, self.bridge_pending = self.bridge_pending, False
        action = super().act(completion)
        # the prefix "<search>" is part of the completion: left in, "search" would be a query word
        query = completion.replace("<search>", "", 1).split("</search>")[0].strip()
        if bridge and query and not isinstance(action, Call):
            return Call("search", {"query": query})
        return action
