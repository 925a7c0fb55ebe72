"""A hand-written search_qa harness: search, follow names, answer with a name of the passages.

Turn 1 writes a search query (prefix "<search>", stop at "</search>"); the search runs on the
query plus the question's own words, three passages. Every later turn but the last chooses, among
the names and numbers of the passages, one to look up next (the bridge of a two-hop question:
"the founder of X" is on X's page, the founder's birthplace on the founder's). The last turn
restates the question and chooses the answer among the names, numbers and dates of every passage
read, with "yes" and "no" first for a yes/no question (prefix "<answer>"). ``max_turns`` 2 answers after one search.

The choices are spans of what the environment returned, never computed from the question: the
model earns the reward by choosing, and the null policy (uniform over the choices) stays far
below the containment limit.
"""
import re

from harnesses.contract import MAX_CHOICE_CHARS, BaseHarness, Call, Finish, Prompt

SYSTEM = "Answer factual questions by searching an encyclopaedia."
MONTH = "January|February|March|April|May|June|July|August|September|October|November|December"
# a word (any script; "'s" of a possessive dropped), a number, or a date written out
TOKEN = re.compile(rf"\b(?:\d{{1,2}} (?:{MONTH}) \d{{3,4}}|(?:{MONTH}) \d{{1,2}}, \d{{3,4}}|(?:{MONTH}) \d{{3,4}})\b"
                   r"|\d[\d,.]*\d|\d|[^\W\d_](?:[\w-]|['’](?!s\b)\w)*")
CONNECT = {"of", "the", "de", "la", "von", "van", "du", "del", "da", "di", "le", "y", "bin", "al"}
# sentence openers and the passages' own labels are not answers; "The Salou River" -> "Salou River"
SKIP = {"The", "A", "An", "In", "On", "At", "It", "He", "She", "They", "His", "Her", "Its", "This", "That",
        "Much", "Many", "Title", "Doc"}
YES_NO = {"is", "are", "was", "were", "do", "does", "did", "has", "have", "had", "can", "could", "will", "would"}
MAX_SPANS = 48
# The longest name offered: a longer one (a list of titles in a real passage) plus its closing tag
# ("</answer>" or "</search>", both 9 characters) would break the contract's cap on a choice, and
# a Prompt that breaks it ends the episode.
LONGEST_SPAN = MAX_CHOICE_CHARS - len("</answer>")


def spans_of(passages, question):
    """Names, numbers and dates of the passages in order, none that the question itself names and
    none too long for a choice; "yes" and "no" first when the question asks for one."""
    texts = [str(p.get(key, "")) for p in passages for key in ("title", "text")]
    # a sentence's capitalised first word that the passages also write in lower case is not a name
    # ("Born in 1875 in Thodafus")
    common = {w for text in texts for w in re.findall(r"\b[^\W\d_A-Z][\w'-]*", text) if w.islower()}
    words = question.split()
    found = ["yes", "no"] if words and words[0].lower() in YES_NO else []
    for text in texts:
        for span in text_spans(text, common):
            if span not in found and span.lower() not in question.lower():
                found.append(span)
    return [span for span in found if len(span) <= LONGEST_SPAN]


def text_spans(text, common):
    """Runs of capitalised words joined by spaces and CONNECT words; numbers; dates and their year."""
    out, run, joints, end = [], [], [], 0

    def close():
        if run:
            out.append(" ".join(run))
        run.clear()
        joints.clear()

    for match in TOKEN.finditer(text):
        word, tail = match.group(), text[end:match.start()].rstrip()
        # a sentence ends in the gap (tokens never end in . ! ? :), or the text starts here
        opens = tail[-1:] in (".", "!", "?", ":") or (not tail and end == 0)
        end = match.end()
        if tail:  # punctuation between two words ends a name
            close()
        if word[0].isupper() and " " not in word and (run or not (word in SKIP or opens and word.lower() in common)):
            run.extend([*joints, word])
            joints.clear()
        elif run and word in CONNECT:
            joints.append(word)
        else:
            close()
            if " " in word:
                out += [word, word.split()[-1]]
            elif word[0].isdigit():
                out.append(word)
    close()
    return out


def render(passages):
    if not passages:
        return "No search results found."
    return "\n".join(f"Doc {i} (Title: {p['title']}) {p['text']}" for i, p in enumerate(passages, 1))


class Harness(BaseHarness):
    max_turns = 3
    token_budget = 512
    turn_tokens = 32

    def __init__(self):
        self.turns = 0
        self.question = ""
        self.spans = []

    def start(self, observation):
        self.question = observation["question"]
        text = (f"Question: {self.question}\n"
                "Search the encyclopaedia for the page that answers it: write a short query with the "
                "names from the question.")
        return Prompt(messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}],
                      max_new_tokens=self.turn_tokens, stop=["</search>"], prefix="<search>")

    def act(self, completion):
        self.turns += 1
        if self.turns >= self.max_turns:
            return Finish()
        # the whole message, prefix included: left in, the tag's "search" would be a query word
        query = completion.split("<search>")[-1].split("</search>")[0].strip()
        if self.turns == 1:
            query = f"{query} {self.question}".strip()
        if not query:
            return Finish()
        return Call("search", {"query": query, "top_k": 3, "max_chars": 600})

    def observe(self, observation):
        passages = observation.get("passages") or []
        # the newest passages' names first: after a bridge search they hold a two-hop answer, and
        # long real passages can hold more names than the choice list keeps
        new = spans_of(passages, self.question)
        self.spans = new + [span for span in self.spans if span not in new]
        shown = render(passages) if not observation.get("error") else f"Search error: {observation['error']}"
        names = self.spans[:MAX_SPANS]
        if not names:
            return Finish()
        if self.turns + 1 < self.max_turns:  # a turn is left after the next: follow a name first
            text = (f"{shown}\n\nWhich name from these passages should be looked up next to answer "
                    f"\"{self.question}\"?")
            return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=self.turn_tokens,
                          prefix="<search>", choices=[name + "</search>" for name in names])
        text = f"{shown}\n\nQuestion: {self.question}\nAnswer with a name, place or year from the passages."
        return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=self.turn_tokens,
                      prefix="<answer>", choices=[name + "</answer>" for name in names])
