"""The offline proposer's layers: ordinary Python classes rendered into a harness's text."""
from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import json
import sys
import textwrap
from pathlib import Path

import pytest

from harnesses.proposers.primitives import NotApplicable, library
from harnesses.proposers.primitives.edit import add_layer
from harnesses.proposers.primitives.render import render

ROOT = Path(__file__).resolve().parents[2]
IDS = Path(__file__).with_name("layer_ids.json")
EXAMPLES = {"chess_puzzles": ["chess_annotated", "chess_choice"],
            "math_reasoning": ["math_expression", "math_program"], "search_qa": ["search_spans"]}
LAYER_MODULES = ("common", "chess_puzzles", "math_reasoning", "search_qa", "search_spans")


def edit_ids() -> dict[str, str]:
    """Every primitive applied to each domain's seed and hand-written examples: the sha256 of the
    source it writes, or the reason it does not apply."""
    out = {}
    for domain, examples in EXAMPLES.items():
        info, primitives = library(domain)
        roots = {"seed": ROOT / f"harnesses/seeds/{domain}.py"}
        roots |= {name: ROOT / f"harnesses/examples/{name}.py" for name in examples}
        for name, path in roots.items():
            source = path.read_text()
            for p in primitives:
                key = f"{domain}/{name}/{p.name}"
                try:
                    out[key] = hashlib.sha256(p.apply(source, info).source.encode()).hexdigest()
                except NotApplicable as e:
                    out[key] = f"not applicable: {e}"
    return out


def test_every_edit_writes_the_source_it_wrote_when_the_studies_ran():
    # a harness's id is the hash of its source: a layer whose text changes gives every harness it
    # wrote a new id, so archived runs and docs/results no longer name what the library writes.
    # After a deliberate change: python tests/harnesses/test_layers.py (rewrites layer_ids.json).
    expected, found = json.loads(IDS.read_text()), edit_ids()
    changed = sorted(k for k in expected.keys() | found.keys() if expected.get(k) != found.get(k))
    assert not changed, f"{len(changed)} edits write other text than before: {changed[:8]}"


def test_every_layer_class_is_rendered_by_a_primitive():
    bases = set()
    classes = {}
    for name in LAYER_MODULES:
        module = importlib.import_module(f"harnesses.proposers.primitives.layers.{name}")
        for cls in vars(module).values():
            if inspect.isclass(cls) and cls.__module__ == module.__name__:
                classes[cls.__name__] = cls
                bases.update(b.__name__ for b in cls.__bases__ if b.__module__ == module.__name__)
    primitives = "".join((ROOT / f"harnesses/proposers/primitives/{n}.py").read_text() for n in LAYER_MODULES)
    unused = [n for n in classes if n not in bases and f"layers.{n}" not in primitives]
    assert len(classes) >= 25 and not unused


@pytest.fixture
def layer_module(tmp_path, monkeypatch):
    """Writes a layer module under a fresh name and imports it."""
    count = iter(range(1000))

    def make(text: str):
        name = f"layer_probe_{tmp_path.name.replace('-', '_')}_{next(count)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        monkeypatch.syspath_prepend(str(tmp_path))
        module = importlib.import_module(name)
        monkeypatch.delitem(sys.modules, name)
        return module
    return make


PROBE = '''
    import re

    from harnesses.contract import BaseHarness as Harness
    from harnesses.proposers.primitives.layers.slots import ANSWER_PATTERN, TURNS
    from harnesses.proposers.primitives.render import inline


    @inline
    def pick(options, text):
        """Not rendered."""
        # the first option the text names
        found = [o for o in options if o in text]
        return found


    class Base(Harness):
        """Not rendered either."""

        max_turns = TURNS
        probe_count = 0


    class Probe(Base):
        # WHY
        probe_answer = re.compile(ANSWER_PATTERN)

        def act(self, completion):
            self.probe_count += 1
            options, text = ["a", "b"], completion
            found = pick(options, text)
            return self.probe_finish(found)
'''


def test_render_fills_slots_renames_names_inlines_and_puts_bases_first(layer_module):
    module = layer_module(PROBE)
    body = render(module.Probe, {"TURNS": 5, "ANSWER_PATTERN": 'r"<a>"', "WHY": "a comment slot"},
                  {"probe_count": "seen", "probe_finish": "done"})
    assert body == textwrap.dedent('''\
        max_turns = 5
        seen = 0

        # a comment slot
        probe_answer = re.compile(r"<a>")

        def act(self, completion):
            self.seen += 1
            options, text = ["a", "b"], completion
            # the first option the text names
            found = [o for o in options if o in text]
            return self.done(found)''')
    layered = add_layer("class Harness:\n    pass\n", "probe", "a probe", body)
    assert "\nimport re\nclass Harness(Harness):\n" in layered
    ast.parse(layered)


def test_render_refuses_a_missing_or_unknown_value_naming_file_and_line(layer_module):
    module = layer_module(PROBE)
    with pytest.raises(ValueError, match=r"layer_probe_\w+\.py:20: slot TURNS has no value"):
        render(module.Probe, {"ANSWER_PATTERN": '"x"', "WHY": "w"})
    with pytest.raises(ValueError, match="has no slot or name NUDGE, probe_missing"):
        render(module.Probe, {"TURNS": 1, "ANSWER_PATTERN": '"x"', "WHY": "w", "NUDGE": '"n"'},
               {"probe_missing": "x"})


def test_render_refuses_an_inlined_call_it_cannot_splice(layer_module):
    module = layer_module(PROBE.replace("found = pick(options, text)", "found = pick(text, options)"))
    with pytest.raises(ValueError, match=r"\.py:31: an inlined call must read `found = pick\(options, text\)`"):
        render(module.Probe, {"TURNS": 1, "ANSWER_PATTERN": '"x"', "WHY": "w"})


if __name__ == "__main__":
    IDS.write_text(json.dumps(edit_ids(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {IDS}")
