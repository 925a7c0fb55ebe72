"""`whale report` on small hand-built runs: the page is self-contained, the numbers are right."""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from harnesses.archive import Archive
from whale.report import write_report
from whale.store import Store
from whale.types import Rollout

ROOT = Path(__file__).resolve().parents[2]
DOMAIN = "math_reasoning"
W0, W1, W2 = "0a1b2c3d4e5f", "1111aaaa2222", "3333bbbb4444"  # base, after cycle 1, after cycle 2
V1, V2 = "5555cccc6666", "7777dddd8888"  # the whale run's weights after cycles 1 and 2
K, N_TEST = 2, 4
HYPOTHESIS = "a <b>second</b> turn & a format nudge"
COMMIT = "c0ffee" * 6 + "beef"


def rollouts(run_id, cycle, phase, split, hid, wid, n_examples, k, ones, step=0):
    """``n_examples`` x ``k`` rollouts of which the first ``ones`` have reward 1."""
    out = []
    for i in range(n_examples * k):
        ex, s = divmod(i, k)
        out.append(Rollout(run_id=run_id, cycle=cycle, phase=phase, step=step, split=split, example_id=f"{split}-{ex}",
                           sample_idx=s, harness_id=hid, weights_id=wid, seed=i, reward=float(i < ones),
                           formatted=True, turns=1, tokens_in=40, tokens_out=20, stop_reason="answered"))
    return out


def eval_row(run_id, cycle, phase, hid, wid, mean, cumulative):
    return {"run_id": run_id, "cycle": cycle, "phase": phase, "harness_id": hid, "weights_id": wid, "split": "test",
            "k": K, "n_examples": N_TEST, "mean_at_k": mean, "format_rate": 0.9, "truncation_rate": 0.1,
            "rollouts": N_TEST * K, "cumulative_rollouts": cumulative}


def new_run(runs: Path, run_id: str, condition: str) -> tuple[Store, Archive, str]:
    store = Store(runs / run_id / "rollouts.duckdb")
    store.insert("runs", [{"run_id": run_id, "domain": DOMAIN, "condition": condition,
                           "params": json.dumps({"model": {"export_dir": "data/model"}})}])
    archive = Archive(runs / run_id, store, DOMAIN)
    h0 = archive.add((ROOT / "harnesses" / "seeds" / f"{DOMAIN}.py").read_text(), origin="seed")
    archive.set_status(h0, "ok")
    return store, archive, h0


def weight_phase_rows(store, run_id, cycle, first, h0, before, after):
    """Two RSFT steps of 2 prompts x 4 samples (16 weight rollouts) and the phase row."""
    for step in (first, first + 1):
        store.insert_rollouts(rollouts(run_id, cycle, "weight", "weight", h0, before, 2, 4, 3, step=step))
        store.insert("train_steps", [{"run_id": run_id, "cycle": cycle, "step": step, "weights_before": before,
                                      "weights_after": after, "reward_mean": 0.375, "accepted": 3, "total": 8,
                                      "loss": 0.9, "tokens": 300, "wall_s": 2.5, "skipped": False}])
    store.insert("phases", [{"run_id": run_id, "cycle": cycle, "phase": "weight", "first_step": first,
                             "last_step": first + 1, "harness_id": h0, "weights_id": after, "decision": "end",
                             "reason": "fixed length: 2 steps"}])


def build_weight_only(runs: Path) -> str:
    rid = f"{DOMAIN}-weight_only"
    store, _, h0 = new_run(runs, rid, "weight_only")
    weight_phase_rows(store, rid, 1, 0, h0, W0, W1)
    weight_phase_rows(store, rid, 2, 2, h0, W1, W2)
    for cycle, phase, wid, mean, cum in ((0, "start", W0, 0.25, 0), (1, "weight", W1, 0.375, 16),
                                         (2, "weight", W2, 0.375, 32)):
        store.insert("evals", [eval_row(rid, cycle, phase, h0, wid, mean, cum)])
        store.insert_rollouts(rollouts(rid, cycle, "eval", "test", h0, wid, N_TEST, K, int(mean * N_TEST * K)))
    store.close()
    return h0


def build_whale(runs: Path) -> tuple[str, str, str]:
    rid = f"{DOMAIN}-whale"
    store, archive, h0 = new_run(runs, rid, "whale")
    weight_phase_rows(store, rid, 1, 0, h0, W0, V1)
    seed = archive.source(h0)
    h1 = archive.add(seed.replace("max_turns = 2", "max_turns = 3"), origin="offline", parents=[h0],
                     hypothesis="more turns let the program run", axis="budget", cycle=1, iteration=2)
    h2 = archive.add(archive.source(h1).replace("Put the final answer", "Print, then put the final answer"),
                     origin="claude", parents=[h1], hypothesis=HYPOTHESIS, axis="nudge", cycle=1, iteration=4)
    sibling = archive.add(seed.replace("turn_tokens = 256", "turn_tokens = 384"), origin="offline", parents=[h0],
                          hypothesis="longer turns", axis="budget", cycle=1, iteration=3)
    bad = archive.add("class Harness:\n    pass\n", origin="claude", parents=[h1], hypothesis="broken", cycle=1,
                      iteration=4)
    for hid, status in ((h1, "ok"), (h2, "ok"), (sibling, "ok"), (bad, "error")):
        archive.set_status(hid, status, "Traceback: contract" if status == "error" else None)
    archive.set_null_reward(h2, 0.125)  # the final harness: what it scores without the model
    for it, hid, score in ((1, h0, 0.25), (2, h1, 0.5), (3, sibling, 0.25), (4, h2, 0.75)):
        store.insert_rollouts(rollouts(rid, 1, "harness", "harness", hid, V1, 4, 1, int(score * 4), step=it))
        store.insert("scores", [{"run_id": rid, "harness_id": hid, "weights_id": V1, "split": "harness", "cycle": 1,
                                 "iteration": it, "n": 4, "mean_reward": score, "format_rate": 1.0,
                                 "truncation_rate": 0.0, "error_rate": 0.0, "mean_turns": 1.5}])
    store.insert("phases", [{"run_id": rid, "cycle": 1, "phase": "harness", "first_step": 1, "last_step": 4,
                             "harness_id": h2, "weights_id": V1, "decision": "end", "reason": "fixed length: 4"}])
    # plain INSERT: Store.insert's INSERT OR IGNORE is refused on this key-less table
    store.con.executemany(
        "INSERT INTO proposer_calls (run_id, cycle, iteration, proposer, model, input_tokens, output_tokens, "
        "cost_usd, fallback_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [[rid, 1, 2, "offline", "offline", 0, 0, 0.0, "anthropic: 529 overloaded"],
         [rid, 1, 3, "claude", "claude-opus-4-7", 12000, 3000, 0.405, None]])
    weight_phase_rows(store, rid, 2, 2, h2, V1, V2)
    for code in (COMMIT, COMMIT, COMMIT + "+dirty.0123456789ab"):  # started, resumed, resumed after an edit
        store.record_start(rid, code)
    for cycle, phase, hid, wid, mean, cum in ((0, "start", h0, W0, 0.25, 0), (1, "weight", h0, V1, 0.375, 16),
                                              (1, "harness", h2, V1, 0.5, 32), (2, "weight", h2, V2, 0.625, 48)):
        store.insert("evals", [eval_row(rid, cycle, phase, hid, wid, mean, cum)])
        store.insert_rollouts(rollouts(rid, cycle, "eval", "test", hid, wid, N_TEST, K, int(mean * N_TEST * K)))
    store.close()
    ckpt = runs / rid / "checkpoints" / "step-000004"  # the final weights' checkpoint, metadata only
    ckpt.mkdir(parents=True)
    (ckpt / "whale_checkpoint.json").write_text(json.dumps({"weights_id": V2, "step": 4}))
    return h0, h2, sibling


def build_measurement(runs: Path, hid: str) -> None:
    """What `whale eval` leaves: test rollouts of (final whale harness, base weights), no evals rows."""
    rid = f"eval-{DOMAIN}"
    store = Store(runs / rid / "rollouts.duckdb")
    store.insert("runs", [{"run_id": rid, "domain": DOMAIN, "condition": "eval", "params": "{}"}])
    store.insert_rollouts(rollouts(rid, 0, "eval", "test", hid, W0, N_TEST, K, 3))  # mean@2 = 3/8
    store.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    runs = tmp_path_factory.mktemp("report") / "runs"
    h0 = build_weight_only(runs)
    _, h2, sibling = build_whale(runs)
    build_measurement(runs, h2)
    html = write_report(runs, runs / "report")
    return {"runs": runs, "html": html, "text": html.read_text(), "h0": h0, "h2": h2, "sibling": sibling}


def test_page_fetches_nothing_and_embeds_every_figure(report):
    text = report["text"]
    assert not re.search(r"<script|<link|@import|url\(", text, re.I)
    refs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)""", text, re.I)
    assert refs and all(r.startswith(("data:image/png;base64,", "#")) for r in refs), refs
    assert "http://" not in text and "https://" not in text
    assert text.count("data:image/png;base64,") == 5  # curves, 2x2, rollouts, proposer, one lineage


def test_pngs_are_written_and_valid(report):
    folder = report["runs"] / "report" / DOMAIN
    names = {"curves.png", "decomposition.png", "rollouts_by_phase.png", "proposer_cost.png",
             f"lineage_{DOMAIN}-whale.png"}
    assert {p.name for p in folder.iterdir()} == names
    for name in names:
        data = (folder / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, name


def test_metrics_best_and_equal_rollouts(report):
    m = json.loads((report["runs"] / "report" / "metrics.json").read_text())[DOMAIN]
    assert set(m) == {"weight_only", "whale"}  # the `whale eval` run has no evaluations of its own
    # weight_only reaches 0.375 at 16 rollouts and again at 32: the best is the first point reaching it
    assert m["weight_only"] == {"run_id": f"{DOMAIN}-weight_only", "k": K, "best_mean_at_k": 0.375,
                                "rollouts_at_best": 16, "final_mean_at_k": 0.375, "final_rollouts": 32,
                                "at_equal_rollouts": 0.375, "equal_rollout_budget": 32,
                                # per-example final rewards 1, .5, 0, 0: resampling 4 examples spans 0 to .75
                                "final_ci95": [0.0, 0.75], "final_null_reward": None}  # no null reward stored
    # whale's best (0.625) needs 48 rollouts; within B = 32 (inclusive) its best is the harness point at 32
    assert (m["whale"]["best_mean_at_k"], m["whale"]["rollouts_at_best"]) == (0.625, 48)
    assert (m["whale"]["at_equal_rollouts"], m["whale"]["equal_rollout_budget"]) == (0.5, 32)
    csv = (report["runs"] / "report" / "curves.csv").read_text().splitlines()
    assert csv[0] == "domain,condition,run_id,cycle,phase,cumulative_rollouts,mean_at_k"
    assert f"{DOMAIN},whale,{DOMAIN}-whale,1,harness,32,0.5" in csv and len(csv) == 1 + 3 + 4


def test_steps_pair_each_change_with_the_point_before(report):
    rows = (report["runs"] / "report" / "steps.csv").read_text().splitlines()
    assert rows[0] == ("domain,condition,run_id,cycle,point,cumulative_rollouts,changed,mean_at_k,ci95_lo,ci95_hi,"
                       "delta,delta_lo,delta_hi")
    whale = [r.split(",") for r in rows[1:] if f",{DOMAIN}-whale," in r]
    # per-example test rewards (K = 2): start 1,0,0,0; weight 1,.5,0,0; harness 1,1,0,0; weight 1,1,.5,0
    assert [(r[4], r[5], r[6], r[7], r[10]) for r in whale] == [
        ("start", "0", "", "0.25", ""), ("weight", "16", "weights", "0.375", "0.125"),
        ("harness", "32", "harness", "0.5", "0.125"), ("weight", "48", "weights", "0.625", "0.125"),
        ("end - start", "48", "", "", "0.375")]
    for r in whale[1:]:  # every paired difference is >= 0 per example, so its interval cannot go below 0
        assert 0 <= float(r[11]) <= float(r[10]) <= float(r[12])
    # weight_only's second weight phase changed the weights but no test example's reward: 0 [0, 0]
    only = [r.split(",") for r in rows[1:] if f",{DOMAIN}-weight_only," in r]
    assert [(r[4], r[10], r[11], r[12]) for r in only[1:]] == [
        ("weight", "0.125", "0.0", "0.375"), ("weight", "0.0", "0.0", "0.0"), ("end - start", "0.125", "0.0", "0.375")]
    assert "What each phase bought" in report["text"] and "<td>end - start</td>" in report["text"]


def test_tables_show_the_inserted_values(report):
    text = report["text"]
    assert "Equal-rollout budget B = 32 rollouts" in text
    assert re.search(r"<td>whale</td><td>math_reasoning-whale</td><td class=\"num\">0\.6250</td><td>\[[0-9.]+, "
                     r"[0-9.]+\]</td><td>0\.125</td><td class=\"num\">48</td><td class=\"num\">0\.6250</td>"
                     r"<td class=\"num\">48</td><td class=\"num\">0\.5000</td>", text)
    assert "Paired comparison of the final scores" in text and "weight_only - whale" in text
    # rollouts by phase: weight 32, harness 4 x 4, eval 4 x 8 for the whale run
    assert re.search(r"<td>math_reasoning-whale</td><td class=\"num\">32</td><td class=\"num\">16</td>"
                     r"<td class=\"num\">32</td><td class=\"num\">80</td>"
                     r"<td>c0ffeec0ffee, c0ffeec0ffee\+dirty\.0123456789ab</td>", text)
    assert re.search(r"<td>math_reasoning-weight_only</td>(<td class=\"num\">\d+</td>){4}<td>not recorded</td>", text)
    assert re.search(r"<td>claude, offline</td><td class=\"num\">2</td><td class=\"num\">12000</td>"
                     r"<td class=\"num\">3000</td><td class=\"num\">0.4050</td><td class=\"num\">1</td>", text)


def test_decomposition_cells_measured_borrowed_or_commanded(report):
    text, runs = report["text"], report["runs"]
    # base weights x final harness: measured by `whale eval` only
    assert "<b>0.3750</b><br><small>test rollouts in run eval-math_reasoning (4 examples, k=2)</small>" in text
    command = (f"whale eval --domain {DOMAIN} --harness {runs}/{DOMAIN}-whale/harnesses/{report['h0']}.py "
               f"--model {runs}/{DOMAIN}-whale/checkpoints/step-000004 -k 2")
    assert "not measured" in text and command in text
    assert "gains over base x h0: weights +0.1250, harness +0.0000, joint +0.1250, interaction +0.0000" in text
    assert "gains over base x h0: harness +0.1250, joint +0.3750</p>" in text  # whale: final x h0 missing


def test_lineage_walks_parents_and_escapes_text(report):
    text = report["text"]
    lineage = text[text.index("Lineage of the final harness"):]
    assert f"final harness {report['h2']}" in lineage
    assert report["sibling"] not in lineage  # scored in the same phase, but not an ancestor
    assert "a &lt;b&gt;second&lt;/b&gt; turn &amp; a format nudge" in lineage and HYPOTHESIS not in text
    pre = lineage[lineage.index("<pre>") + 5:lineage.index("</pre>")]
    assert '<span class="add">+    max_turns = 3</span>' in pre
    diff = html.unescape(re.sub(r"<[^>]+>", "", pre)).splitlines()
    assert diff[:2] == [f"--- {report['h0']}.py (h0)", f"+++ {report['h2']}.py (final)"]
    assert '-            "Put the final answer in \\\\boxed{}."' in diff
    assert '+            "Print, then put the final answer in \\\\boxed{}."' in diff
    assert "-    max_turns = 2" in diff and "+    max_turns = 3" in diff


def test_locked_database_is_skipped_with_a_warning(report, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(report["runs"] / f"{DOMAIN}-weight_only", runs / f"{DOMAIN}-weight_only")
    busy = runs / "chess_puzzles-whale" / "rollouts.duckdb"
    Store(busy).close()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
                               "print('locked', flush=True); sys.stdin.read()", str(busy)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        text = write_report(runs, tmp_path / "out").read_text()
    finally:
        holder.communicate("", timeout=30)
    assert f"{busy}: could not be opened read-only, skipped" in text
    assert "math_reasoning-weight_only" in text and "chess_puzzles" not in text.split("Not included:")[0]


def test_a_store_from_before_run_starts_is_read(report, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(report["runs"] / f"{DOMAIN}-whale", runs / f"{DOMAIN}-whale")
    con = duckdb.connect(str(runs / f"{DOMAIN}-whale" / "rollouts.duckdb"))
    con.execute("DROP TABLE run_starts")
    con.close()
    text = write_report(runs, tmp_path / "out").read_text()
    assert "could not be opened" not in text
    assert re.search(r"<td>math_reasoning-whale</td>(<td class=\"num\">\d+</td>){4}<td>not recorded</td>", text)


def test_run_ids_restrict_the_report(report, tmp_path):
    html_path = write_report(report["runs"], tmp_path / "out", run_ids=[f"{DOMAIN}-weight_only", "missing-run"])
    m = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert list(m[DOMAIN]) == ["weight_only"] and m[DOMAIN]["weight_only"]["equal_rollout_budget"] == 32
    text = html_path.read_text()
    assert f"{report['runs'] / 'missing-run' / 'rollouts.duckdb'}: no such file (skipped)" in text
    assert "Lineage of the final harness</h3>\n<p>No run of this domain has a harness phase.</p>" in text


@pytest.mark.slow
def test_page_renders_offline_in_headless_chromium(report, tmp_path):
    chromium = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if chromium is None:
        pytest.skip("chromium is not installed (`make browser` installs it): cannot render the page")
    shot = tmp_path / "page.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,2000",
                    report["html"].resolve().as_uri()], check=True, capture_output=True, timeout=180)
    import matplotlib.image as mpimg
    import numpy as np

    pixels = mpimg.imread(shot)[..., :3]
    assert pixels.shape[:2] == (2000, 1200)
    colours = np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 200  # text alone is grey antialiasing; the plots' lines and markers add colours
    coloured = np.abs(pixels - pixels.mean(axis=2, keepdims=True)).max(axis=2) > 0.2
    assert coloured.mean() > 0.001, "no saturated (plot) pixels on the first screen"
