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
    assert (paper.profile, paper.rsft.prompt_batch, paper.backend.kind) == ("paper", 256, "vllm")


def test_a_profiles_per_domain_overlay_wins_over_the_defaults_one():
    """Chess's default budget is its own (per_domain); the study profile's budget still binds there."""
    budgets = {(profile, d): load_settings(ROOT / "params.yaml", profile=profile, domain=d).schedule.budget
               for profile in ("default", "study") for d in ("chess_puzzles", "math_reasoning")}
    assert budgets == {("default", "chess_puzzles"): 640, ("default", "math_reasoning"): 320,
                       ("study", "chess_puzzles"): 128, ("study", "math_reasoning"): 128}
    # every profile but `handwritten` starts from the domain's seed h0
    h0 = {(p, d): load_settings(ROOT / "params.yaml", profile=p, domain=d).harness_search.h0
          for p in ("default", "study", "paper", "handwritten") for d in ("chess_puzzles", "math_reasoning")}
    assert h0 == {("default", "chess_puzzles"): None, ("default", "math_reasoning"): None,
                  ("study", "chess_puzzles"): None, ("study", "math_reasoning"): None,
                  ("paper", "chess_puzzles"): None, ("paper", "math_reasoning"): None,
                  ("handwritten", "chess_puzzles"): "harnesses/examples/chess_annotated.py",
                  ("handwritten", "math_reasoning"): "harnesses/examples/math_expression.py"}


def test_the_paper_profile_has_the_released_settings_of_each_domain():
    """Qwen3.5-2B / 2B / 4B, lr 1e-6 / 1e-7 / 1e-7, 4 / 6 / 4 epochs of steps, max_seq_len above
    prompt + the 8192-token h0 budget; an override still wins over the domain's overlay."""
    got = {d: load_settings(ROOT / "params.yaml", profile="paper", domain=d) for d in
           ("search_qa", "math_reasoning", "chess_puzzles")}
    assert {d: (s.model.source, s.rsft.lr) for d, s in got.items()} == {
        "search_qa": ("Qwen/Qwen3.5-2B", 1e-6), "math_reasoning": ("Qwen/Qwen3.5-2B", 1e-7),
        "chess_puzzles": ("Qwen/Qwen3.5-4B", 1e-7)}
    for d, s in got.items():
        assert s.domain == d and s.harness_search.h0_budgets["token_budget"] == 8192
        assert s.rsft.max_seq_len >= 2048 + 8192
        per_step = s.rsft.prompt_batch * s.rsft.k
        assert s.schedule.budget // per_step == {"search_qa": 308, "math_reasoning": 438, "chess_puzzles": 268}[d]
    lr = load_settings(ROOT / "params.yaml", profile="paper", domain="math_reasoning",
                       overrides={"rsft": {"lr": 3e-7}})
    assert lr.rsft.lr == 3e-7
    with pytest.raises(ValueError, match="loaded for domain 'math_reasoning', not 'chess_puzzles'"):
        got["math_reasoning"].check_domain("chess_puzzles")
    paper = load_settings(ROOT / "params.yaml", profile="paper")  # loaded for no domain: its overlays bind
    with pytest.raises(ValueError, match="per_domain.search_qa has an overlay"):
        paper.check_domain("search_qa")


def test_a_bad_per_domain_value_names_its_line_even_when_loaded_for_no_domain(tmp_path):
    text = (ROOT / "params.yaml").read_text()
    top = text.index("\nper_domain:\n")  # the defaults' overlays, not a profile's
    chess = text.index("\n  chess_puzzles:\n", top) + len("\n  chess_puzzles:\n")
    text = text[:chess] + "    rsft: {lr: -1}\n" + text[chess:]
    (tmp_path / "params.yaml").write_text(text)
    line = text.splitlines().index("    rsft: {lr: -1}") + 1
    where = rf"rsft\.lr \(line {line}, per_domain\.chess_puzzles\): Input should be greater"
    with pytest.raises(SettingsError, match=where):
        load_settings(tmp_path / "params.yaml")
    assert load_settings(tmp_path / "params.yaml", domain="math_reasoning").rsft.lr > 0  # other domains run


@pytest.mark.parametrize("overrides, expected", [
    ({"schedul": {"E": 1}}, r"schedul \(from --set\): unknown key; accepted: profile, domain, data_seed, seed, model"),
    ({"schedule": {"E": 0}}, r"schedule\.E \(from --set\): Input should be greater than 0 \(got 0\)"),
    ({"rsft": {"k": "four"}}, r"rsft\.k \(from --set\): Input should be a valid integer"),
    ({"backend": {"kind": "sglang"}},
     r"backend\.kind \(from --set\): Input should be 'transformers', 'openai' or 'vllm'"),
    ({"backend": {"vllm": {"dtype": "half"}}}, r"backend\.vllm\.dtype \(from --set\): Input should be 'auto'"),
    ({"backend": {"kind": "vllm"}, "parallel": {"engine": "ray"}}, r"every Ray worker would start a server"),
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


@pytest.mark.parametrize(("backend", "expected"), [
    ({"kind": "vllm"}, "float32"),  # auto: model.dtype
    ({"kind": "vllm", "vllm": {"dtype": "bfloat16"}}, "bfloat16"),
    ({"kind": "openai", "vllm": {"dtype": "bfloat16"}}, "float32"),  # not a vLLM the run starts
])
def test_the_fingerprint_rounds_to_the_dtype_the_server_holds(backend, expected):
    assert load_settings(ROOT / "params.yaml", overrides={"backend": backend}).served_dtype == expected


def test_the_study640_profile_is_search_qas_defaults_at_make_runs_budget():
    default = load_settings(ROOT / "params.yaml", domain="search_qa")
    long = load_settings(ROOT / "params.yaml", profile="study640", domain="search_qa")
    assert (default.schedule.budget, long.schedule.budget) == (320, 640)
    assert long.model_copy(update={"schedule": default.schedule, "profile": "default"}) == default
    # the adaptive runs it is compared with were started as the default + {"schedule": {"budget": 640}}
    started = load_settings(ROOT / "params.yaml", None, {"schedule": {"budget": 640}}, "search_qa")
    assert started.model_copy(update={"profile": "study640"}) == long


def test_a_run_stored_before_a_setting_existed_is_the_run_that_sets_its_old_behaviour():
    import json

    from whale.run.settings import ADDED, identity

    def stored_without(overrides: dict) -> str:
        params = json.loads(load_settings(ROOT / "params.yaml", overrides=overrides, domain="chess_puzzles").as_json())
        for *path, key in ADDED:
            node = params
            for part in path:
                node = node[part]
            del node[key]  # as a store written before the setting was added holds it
        return json.dumps(params)

    now = load_settings(ROOT / "params.yaml", domain="chess_puzzles")
    assert now.harness_search.accept.samples == "all"
    assert identity(stored_without({})) == identity(now.as_json())
    recheck = {"harness_search": {"accept": {"samples": "recheck"}}}
    other = load_settings(ROOT / "params.yaml", overrides=recheck, domain="chess_puzzles")
    assert identity(stored_without({})) != identity(other.as_json())
    assert identity(stored_without({"storage": {"keep_checkpoints": 3}})) == identity(now.as_json())  # placement
    # a profile's overlay given as --set is the same run
    study = load_settings(ROOT / "params.yaml", profile="study1920", domain="search_qa")
    same = load_settings(ROOT / "params.yaml", overrides={"schedule": {"budget": 1920},
                                                          "eval": {"k": 8, "every": 640, "phases": False}},
                         domain="search_qa")
    assert identity(study.as_json()) == identity(same.as_json())
