"""params.yaml as typed settings: every bad key is refused before anything starts."""
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from whale.run.settings import SettingsError, load_settings
from whale.testing import ROOT


def test_the_defaults_and_the_paper_profile_validate():
    default = load_settings(ROOT / "params.yaml")
    assert (default.profile, default.schedule.E, default.rsft.k, default.data["chess_puzzles"].test) == (
        "default", 0.5, 4, 64)
    paper = load_settings(ROOT / "params.yaml", profile="paper")
    assert (paper.profile, paper.rsft.prompt_batch, paper.backend.kind) == ("paper", 256, "openai")


@pytest.mark.parametrize("overrides, expected", [
    ({"schedul": {"E": 1}}, r"schedul \(from --set\): unknown key; accepted: profile, data_seed, seed, model"),
    ({"schedule": {"E": 0}}, r"schedule\.E \(from --set\): Input should be greater than 0 \(got 0\)"),
    ({"rsft": {"k": "four"}}, r"rsft\.k \(from --set\): Input should be a valid integer"),
    ({"backend": {"kind": "vllm"}}, r"backend\.kind \(from --set\): Input should be 'transformers' or 'openai'"),
    ({"data": {"nope": {"weight": 1, "harness": 1, "test": 1}}}, r"unknown domain\(s\) nope"),
    ({"harness_search": {"claude": {"modle": "x"}}},
     r"harness_search\.claude\.modle \(from --set\): unknown key; accepted: model, max_tokens"),
])
def test_a_bad_override_names_its_key_path_and_the_accepted_values(overrides, expected):
    with pytest.raises(SettingsError, match=expected):
        load_settings(ROOT / "params.yaml", overrides=overrides)


def test_a_bad_key_in_the_file_names_its_line(tmp_path):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["sampling"]["top_p"] = 2.0
    text = yaml.safe_dump(raw, sort_keys=False)
    (tmp_path / "params.yaml").write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.strip().startswith("top_p:"))
    with pytest.raises(SettingsError, match=rf"sampling\.top_p \(line {line}\): Input should be less than or equal"):
        load_settings(tmp_path / "params.yaml")
    del raw["sampling"]["top_p"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(SettingsError, match=r"sampling\.top_p: missing"):
        load_settings(tmp_path / "params.yaml")
    with pytest.raises(SettingsError, match="unknown profile 'gpu'"):
        load_settings(ROOT / "params.yaml", profile="gpu")


def _whale(cwd, *args):
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    return subprocess.run([sys.executable, "-m", "whale.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("args, expected", [
    (["--set", '{"schedul": {"E": 1}}'], "schedul (from --set): unknown key"),
    (["--set", "{not json"], "--set is not valid JSON"),
    (["--domain", "nope"], "invalid choice: 'nope'"),
    (["--condition", "both"], "--condition takes distinct names among"),
])
def test_whale_run_refuses_before_starting_anything(tmp_path, args, expected):
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    out = _whale(tmp_path, "run", "--domain", "chess_puzzles", *args)
    assert out.returncode == 2 and expected in out.stderr, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "temporary server" not in out.stderr + out.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]  # no runs/, no data/
