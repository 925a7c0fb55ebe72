"""The configuration reference of the docs: generated from the settings and params.yaml's comments."""
from pathlib import Path

from whale.run import reference

ROOT = Path(__file__).resolve().parents[2]


def test_every_key_of_params_yaml_has_a_description():
    assert reference.missing_descriptions(ROOT / "params.yaml") == []


def test_a_key_without_its_comment_is_reported(tmp_path):
    text = (ROOT / "params.yaml").read_text()
    comment = "  # Softmax temperature (0 = greedy).\n"
    assert comment in text
    (tmp_path / "params.yaml").write_text(text.replace(comment, ""))
    assert reference.missing_descriptions(tmp_path / "params.yaml") == ["sampling.temperature"]


def test_the_reference_lists_every_setting_with_type_default_and_range():
    text = reference.markdown(ROOT / "params.yaml")
    paths = {k.path for k in reference.keys(ROOT / "params.yaml")}
    for key in ("backend.vllm.max_num_seqs", "schedule.adaptive.harness_max", "harness_search.accept", "seed"):
        assert key in paths and f"`{key}`" in text
    row = next(line for line in text.splitlines() if line.startswith("| `backend.vllm.max_num_seqs`"))
    assert "| int | `64` | >= 1 |" in row
    kind = next(line for line in text.splitlines() if line.startswith("| `backend.kind`"))
    assert "`transformers`" in kind and "`vllm`" in kind
