"""A hand-written math harness: the answer as one line of Python, run by the tool, then the boxed
answer chosen among the integers it printed.

Turn 1 continues the assistant prefix "```python\\nanswer = " and stops at the end of the line, so
the model writes one expression, and the tool runs that line (it prints a last bare expression and
has ``math`` imported): the engine runs only code the model wrote.
A small model writes a short expression that runs far more often than a program that does: it
cannot run out of tokens mid-function or define a function it never calls. The answer turn
continues "\\boxed{" and chooses among the integers the program printed, so the value of a right
expression cannot be miscopied; when nothing usable was printed, the model writes the answer
itself. The harness never computes anything from the question.
"""
import re

from harnesses.contract import MAX_CHOICE_CHARS, BaseHarness, Call, Finish, Prompt

CODE_PREFIX = "```python\nanswer = "
ANSWER_PREFIX = "\\boxed{"
# A program's output is shown from its end, at most this many characters.
OUTPUT_CHARS = 300
# A printed integer, or a float with an integer value ("102805274.0"): a word of the output.
INTEGER = re.compile(r"-?[0-9]+(?:\.0+)?")
MAX_CHOICES = 16


def printed_integers(output):
    """The integers among the output's words, the last printed first, each once."""
    words = [w.split(".")[0] for w in output.split() if INTEGER.fullmatch(w)]
    fitting = [w for w in reversed(words) if len(w) + 1 <= MAX_CHOICE_CHARS]
    return list(dict.fromkeys(fitting))[:MAX_CHOICES]


class Harness(BaseHarness):
    max_turns = 2
    token_budget = 400

    def __init__(self):
        self.answering = False

    def start(self, observation):
        text = (
            f"{observation['question']}\n\n"
            "Complete the line of Python: answer = a single expression that computes the answer, "
            "for example answer = sum(i for i in range(1, 11) if i % 2 == 0)."
        )
        return Prompt(messages=[{"role": "user", "content": text}], max_new_tokens=100,
                      stop=["\n", "```"], prefix=CODE_PREFIX)

    def act(self, completion):
        if self.answering:
            return Finish()
        self.answering = True
        line = completion.removeprefix(CODE_PREFIX).split("```")[0].strip()
        if not line:
            return Finish()
        return Call("python", {"code": line, "timeout_s": 5})

    def observe(self, observation):
        output = observation.get("output") or f"Error: {observation.get('error')}"
        shown = output
        if len(output) > OUTPUT_CHARS:
            # the first word shown may be the end of a number cut in two: not a choice
            shown = output[-OUTPUT_CHARS:]
            words = shown.split(maxsplit=1)
            output = words[1] if len(words) > 1 else ""
        text = (f"The expression evaluated to:\n{shown}\n\n"
                "What is the final answer? Write it as an integer in \\boxed{}.")
        messages = [{"role": "user", "content": text}]
        numbers = printed_integers(output) if observation.get("ok") else []
        if numbers:
            return Prompt(messages=messages, max_new_tokens=16, prefix=ANSWER_PREFIX,
                          choices=[n + "}" for n in numbers])
        return Prompt(messages=messages, max_new_tokens=16, stop=["}"], prefix=ANSWER_PREFIX)
