"""search_qa layers: a search argument on every search, a forced first search, query rewriting,
the passages already read, and lenient parsing of search requests."""
import dataclasses
import re

from harnesses.contract import BaseHarness as Harness
from harnesses.contract import Call, Finish, Prompt
from harnesses.proposers.primitives.layers.slots import SEARCH_ARG, SEARCH_VALUE


class SearchArg(Harness):
    def act(self, completion):
        action = super().act(completion)
        # WHY
        if isinstance(action, Call) and action.tool == "search":
            return dataclasses.replace(action, args={**action.args, SEARCH_ARG: SEARCH_VALUE})
        return action


class SearchFirst(Harness):
    search_first_pending = True

    def start(self, observation):
        prompt = super().start(observation)
        # the first turn opens a search, so every episode reads a passage before it answers
        return dataclasses.replace(prompt, prefix="<search>", stop=["</search>"])

    def act(self, completion):
        first, self.search_first_pending = self.search_first_pending, False
        action = super().act(completion)
        query = completion.replace("<search>", "", 1).split("</search>")[0].strip()
        if first and query and not isinstance(action, Call):
            return Call("search", {"query": query})
        return action


class QueryAddEntity(Harness):
    entity_names = re.compile(r"[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")
    entity_skip = {"Who", "Whom", "Whose", "What", "Where", "When", "Which", "Why", "How", "In", "The"}
    entity_question = ""

    def start(self, observation):
        self.entity_question = observation.get("question", "")
        return super().start(observation)

    def act(self, completion):
        action = super().act(completion)
        # the question's names keep a drifting query on the entity the question is about
        if isinstance(action, Call) and action.tool == "search":
            query = str(action.args.get("query", ""))
            names = [n for n in self.entity_names.findall(self.entity_question)
                     if n not in self.entity_skip and n.lower() not in query.lower()]
            if names:
                return dataclasses.replace(action, args={**action.args, "query": " ".join([query] + names)})
        return action


class QueryFromQuestion(Harness):
    first_query_question = ""
    first_query_done = False

    def start(self, observation):
        self.first_query_question = observation.get("question", "")
        return super().start(observation)

    def act(self, completion):
        action = super().act(completion)
        # the first search carries the whole question: BM25 on its words finds the subject's
        # passage; later searches (the bridge of a two-hop question) stay the model's own
        if isinstance(action, Call) and action.tool == "search" and not self.first_query_done:
            self.first_query_done = True
            query = " ".join([self.first_query_question, str(action.args.get("query", ""))]).strip()
            return dataclasses.replace(action, args={**action.args, "query": query})
        return action


class QueryShort(Harness):
    def act(self, completion):
        action = super().act(completion)
        # BM25 scores every word: the first line, at most 8 words, keeps the entity dominant
        if isinstance(action, Call) and action.tool == "search":
            lines = str(action.args.get("query", "")).strip().splitlines()
            words = lines[0].split()[:8] if lines else []
            if words:
                return dataclasses.replace(action, args={**action.args, "query": " ".join(words)})
        return action


class RetrievedTitles(Harness):
    def start(self, observation):
        self.titles_read = []
        return super().start(observation)

    def observe(self, observation):
        action = super().observe(observation)
        for passage in observation.get("passages") or []:
            if passage.get("title") not in self.titles_read:
                self.titles_read.append(passage.get("title"))
        # naming what was already read steers the next search elsewhere
        if isinstance(action, Prompt) and action.messages and self.titles_read:
            messages = [dict(m) for m in action.messages]
            messages[-1]["content"] += (
                "\n\nPassages read so far: " + "; ".join(str(t) for t in self.titles_read)
                + ". If they do not answer the question, search for something else.")
            return dataclasses.replace(action, messages=messages)
        return action


class LenientSearch(Harness):
    lenient_query = re.compile(r"<search>\s*([^<\n]+)|\bsearch\s*[:(]\s*[\"']?([^\"')\n]+)", re.I)
    lenient_search_turns = 0

    def act(self, completion):
        self.lenient_search_turns += 1
        action = super().act(completion)
        match = self.lenient_query.search(completion)
        # an unclosed <search>, "Search: ..." or search("...") is a search request too
        if (isinstance(action, Finish) and match and self.lenient_search_turns < self.max_turns
                and "</answer>" not in completion):
            query = (match.group(1) or match.group(2) or "").strip()
            if query:
                return Call("search", {"query": query})
        return action
