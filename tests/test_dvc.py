"""The DVC pipeline on a scratch git + DVC copy of the project (dvc.yaml, params.yaml, the domain
code): stage names, the `prepare` stage's caching, which params invalidate which stage,
`dvc exp run -S`, and `dvc metrics show` / `dvc plots show` on report files."""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from domains import NAMES as DOMAINS
from whale.run.conditions import CONDITIONS
from whale.run.settings import PLACEMENT, Settings

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's bin: dvc and the `whale` console script
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "DVC_NO_ANALYTICS": "1"}
PLOT = "test mean@k vs rollouts"


def sh(cwd: Path, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)
    if check and r.returncode:
        raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def dvc(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return sh(cwd, str(BIN / "dvc"), *args, check=check)


def status(project: Path, stage: str) -> dict:
    return json.loads(dvc(project, "status", "--json", stage).stdout or "{}")


def lookup(params: dict, dotted: str):
    node = params
    for part in dotted.split("."):
        node = node[part]
    return node


def set_param(project: Path, dotted: str, value) -> None:
    """Change one value of the scratch params.yaml (formatting is not preserved: DVC compares values)."""
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    *parents, last = dotted.split(".")
    lookup(params, ".".join(parents))[last] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A git + DVC repository holding dvc.yaml, params.yaml and the domain code, with
    `prepare@math_reasoning` reproduced once and committed. Returns (path, first repro output)."""
    p = tmp_path_factory.mktemp("dvc_project")
    for name in ("dvc.yaml", "params.yaml", ".dvcignore", ".gitignore"):
        shutil.copy(ROOT / name, p / name)
    shutil.copytree(ROOT / "domains", p / "domains", ignore=shutil.ignore_patterns("__pycache__"))
    (p / "whale" / "cli").mkdir(parents=True)
    shutil.copy(ROOT / "whale" / "cli" / "prepare.py", p / "whale" / "cli" / "prepare.py")
    shutil.copytree(ROOT / "data" / "sources", p / "data" / "sources")
    sh(p, "git", "init", "-q")
    sh(p, "git", "config", "user.name", "whale tests")
    sh(p, "git", "config", "user.email", "tests@whale.invalid")
    dvc(p, "init", "-q")
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-qm", "pipeline")
    first = dvc(p, "repro", "prepare@math_reasoning")
    sh(p, "git", "add", "-A")
    sh(p, "git", "commit", "-qm", "data")
    return p, first.stdout + first.stderr


@pytest.fixture()
def clean(project):
    """Put params.yaml, dvc.lock and the prepared data back after a test that changes them."""
    p, _ = project
    yield p
    sh(p, "git", "checkout", "-q", "--", "params.yaml", "dvc.lock")
    dvc(p, "checkout", "-q", "prepare@math_reasoning")


def test_stage_names_and_params_are_those_the_code_reads(project):
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    p, _ = project
    with Repo(str(p)) as repo:
        stages = {s.name: s for s in repo.index.stages}
        keys = {name: [k for d in s.deps if isinstance(d, ParamsDependency) for k in d.params]
                for name, s in stages.items()}
    runs = {f"run@{d}-{c}" for d in DOMAINS for c in CONDITIONS}
    assert set(stages) == {f"prepare@{d}" for d in DOMAINS} | {"model_export", "report"} | runs
    params = yaml.safe_load((p / "params.yaml").read_text())
    for declared in keys.values():
        for key in declared:
            lookup(params, key)  # a missing key would stop `dvc repro`
    assert "schedule" not in keys["prepare@math_reasoning"] and "data.math_reasoning" in keys["prepare@math_reasoning"]
    assert not any(k.startswith("data") for k in keys["run@math_reasoning-whale"])  # data come as files
    # every params.yaml section the run's code reads is a dependency of each run stage (but those
    # that only place the work: a run on Ray computes what a local run computes)
    read = set()
    for path in [*ROOT.glob("flows/*.py"), *ROOT.glob("tasks/*.py"), *ROOT.glob("harnesses/**/*.py"),
                 *ROOT.glob("domains/**/*.py"), *ROOT.glob("whale/**/*.py")]:
        if not {"cli", "report"} & set(path.relative_to(ROOT).parts):
            read |= set(re.findall(r"settings\.(\w+)", path.read_text())) & set(Settings.model_fields)
    assert {"schedule", "rsft", "sampling", "seed", *PLACEMENT} <= read
    read -= PLACEMENT
    for name in runs:
        missing = [section for section in read if not any(k.split(".")[0] == section for k in keys[name])]
        assert not missing, f"{name} does not depend on params.yaml sections {missing} its code reads"
    out = stages["run@math_reasoning-adaptive_whale"].outs
    assert [str(o.def_path) for o in out] == ["runs/math_reasoning-adaptive_whale"]


def test_prepare_runs_once_then_is_skipped(project):
    p, first = project
    assert "Running stage 'prepare@math_reasoning'" in first
    sizes = yaml.safe_load((p / "params.yaml").read_text())["data"]["math_reasoning"]
    files = {split: p / "data" / "math_reasoning" / f"{split}.jsonl" for split in sizes}
    for split, path in files.items():
        assert len(path.read_text().splitlines()) == sizes[split]
    mtimes = {s: f.stat().st_mtime_ns for s, f in files.items()}
    again = dvc(p, "repro", "prepare@math_reasoning")
    assert "Stage 'prepare@math_reasoning' didn't change, skipping" in again.stdout
    assert {s: f.stat().st_mtime_ns for s, f in files.items()} == mtimes


def test_only_the_params_a_stage_reads_invalidate_it(clean):
    p = clean
    set_param(p, "schedule.E", 0.7)
    set_param(p, "data.chess_puzzles.weight", 8)  # another domain's sizes
    assert status(p, "prepare@math_reasoning") == {}
    set_param(p, "data.math_reasoning.weight", 8)
    changed = status(p, "prepare@math_reasoning")["prepare@math_reasoning"]
    assert {"changed deps": {"params.yaml": {"data.math_reasoning": "modified"}}} in changed


def test_real_files_under_data_sources_drive_prepare(clean):
    p = clean
    real = p / "data" / "sources" / "math_test.jsonl"
    real.write_text(json.dumps({"question": "What is 6 times 7?", "answer": 42}) + "\n")
    try:
        set_param(p, "sources.math_reasoning", {"test": "data/sources/math_test.jsonl"})
        assert status(p, "prepare@math_reasoning")  # the params key changed
        dvc(p, "repro", "prepare@math_reasoning")
        assert len((p / "data" / "math_reasoning" / "test.jsonl").read_text().splitlines()) == 1
        assert status(p, "prepare@math_reasoning") == {}
        with real.open("a") as f:  # the file's content, not only its name, is a dependency
            f.write(json.dumps({"question": "What is 5 times 7?", "answer": 35}) + "\n")
        changed = status(p, "prepare@math_reasoning")["prepare@math_reasoning"]
        assert "data/sources" in json.dumps(changed)
    finally:
        real.unlink()


def test_byte_code_is_ignored_but_code_changes_count(clean):
    p = clean
    cache = p / "domains" / "math_reasoning" / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "generate.cpython-311.pyc").write_bytes(b"\x00compiled")
    assert status(p, "prepare@math_reasoning") == {}
    generator = p / "domains" / "math_reasoning" / "generate.py"
    original = generator.read_text()
    try:
        generator.write_text(original + "\n# a changed generator\n")
        changed = status(p, "prepare@math_reasoning")["prepare@math_reasoning"]
        assert {"changed deps": {"domains/math_reasoning": "modified"}} in changed
    finally:
        generator.write_text(original)
        shutil.rmtree(cache)


@pytest.mark.slow  # an experiment commits, runs and applies: ~15 s on two loaded cores
def test_exp_run_sets_params_on_the_real_layout(clean):
    p = clean
    r = dvc(p, "exp", "run", "-S", "schedule.E=0.2", "-S", "data.math_reasoning.weight=8", "prepare@math_reasoning")
    assert "Running stage 'prepare@math_reasoning'" in r.stdout
    # the experiment is applied to the workspace: its data and its params
    assert len((p / "data" / "math_reasoning" / "weight.jsonl").read_text().splitlines()) == 8
    rows = json.loads(dvc(p, "exp", "show", "--json").stdout)
    exps = [e for row in rows for e in row.get("experiments") or []]
    assert len(exps) == 1
    params = exps[0]["revs"][0]["data"]["params"]["params.yaml"]["data"]
    assert params["schedule"]["E"] == 0.2 and params["data"]["math_reasoning"]["weight"] == 8
    untouched = yaml.safe_load((ROOT / "params.yaml").read_text())["data"]["chess_puzzles"]["weight"]
    assert params["data"]["chess_puzzles"]["weight"] == untouched  # untouched keys keep their value


def test_metrics_and_plots_read_the_report_files(project):
    p, _ = project
    report = p / "runs" / "report"
    report.mkdir(parents=True, exist_ok=True)
    metrics = {"math_reasoning": {"adaptive WHALE": {"final_mean_at_k": 0.25, "final_rollouts": 320},
                                  "weight only": {"final_mean_at_k": 0.125, "final_rollouts": 320}}}
    (report / "metrics.json").write_text(json.dumps(metrics))
    with (report / "curves.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["domain", "condition", "run_id", "cycle", "phase", "cumulative_rollouts", "mean_at_k"])
        w.writerow(["math_reasoning", "adaptive_whale", "math_reasoning-adaptive_whale", 0, "start", 0, 0.0625])
        w.writerow(["math_reasoning", "adaptive_whale", "math_reasoning-adaptive_whale", 1, "weight", 64, 0.25])
    shown = json.loads(dvc(p, "metrics", "show", "--json").stdout)
    assert shown[""]["data"]["runs/report/metrics.json"]["data"] == metrics
    plots = json.loads(dvc(p, "plots", "show", "--json").stdout)["data"]
    content = plots[PLOT][0]["content"]
    assert content["encoding"]["x"]["field"] == "cumulative_rollouts"
    assert content["layer"][0]["encoding"]["y"]["field"] == "mean_at_k"
    points = [(v["cumulative_rollouts"], v["mean_at_k"]) for v in content["data"]["values"]]
    assert points == [("0", "0.0625"), ("64", "0.25")]
