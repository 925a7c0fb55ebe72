"""The tables and views of a run's store (``whale.store.Store`` creates them on open).

Columns added after stores were first written come as ``ALTER TABLE ... ADD COLUMN IF NOT
EXISTS``, so an older store opens and gains them.
"""

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, domain VARCHAR, condition VARCHAR, params JSON,
    started_at TIMESTAMP DEFAULT current_timestamp);
-- every process that started or resumed the run, and the code it ran (whale/provenance.py)
CREATE TABLE IF NOT EXISTS run_starts (
    run_id VARCHAR, start INTEGER, code VARCHAR, started_at TIMESTAMP DEFAULT current_timestamp,
    PRIMARY KEY (run_id, start));
CREATE TABLE IF NOT EXISTS rollouts (
    run_id VARCHAR, cycle INTEGER, phase VARCHAR, step INTEGER, split VARCHAR,
    example_id VARCHAR, sample_idx INTEGER, harness_id VARCHAR, weights_id VARCHAR, seed BIGINT,
    reward DOUBLE, formatted BOOLEAN, verdict JSON, turns INTEGER, tokens_in INTEGER,
    tokens_out INTEGER, stop_reason VARCHAR, error VARCHAR, messages JSON,
    token_ids INTEGER[], mask UTINYINT[], latency_s DOUBLE, tool_calls INTEGER,
    PRIMARY KEY (run_id, cycle, phase, step, split, example_id, sample_idx, harness_id, weights_id));
-- stores written before tool calls were counted
ALTER TABLE rollouts ADD COLUMN IF NOT EXISTS tool_calls INTEGER;
CREATE TABLE IF NOT EXISTS harnesses (
    harness_id VARCHAR PRIMARY KEY, domain VARCHAR, path VARCHAR, parents VARCHAR[],
    origin VARCHAR, hypothesis VARCHAR, axis VARCHAR, components VARCHAR[],
    status VARCHAR, error VARCHAR, cycle INTEGER, iteration INTEGER,
    created_at TIMESTAMP DEFAULT current_timestamp);
-- the null-policy reward of a candidate (harnesses/validate.py): how much it scores without the model
ALTER TABLE harnesses ADD COLUMN IF NOT EXISTS null_reward DOUBLE;
CREATE TABLE IF NOT EXISTS scores (
    run_id VARCHAR, harness_id VARCHAR, weights_id VARCHAR, split VARCHAR, cycle INTEGER,
    iteration INTEGER, n INTEGER, mean_reward DOUBLE, format_rate DOUBLE,
    truncation_rate DOUBLE, error_rate DOUBLE, mean_turns DOUBLE,
    PRIMARY KEY (run_id, harness_id, weights_id, split, cycle, iteration));
CREATE TABLE IF NOT EXISTS train_steps (
    run_id VARCHAR, cycle INTEGER, step INTEGER, weights_before VARCHAR, weights_after VARCHAR,
    reward_mean DOUBLE, accepted INTEGER, total INTEGER, loss DOUBLE, tokens INTEGER,
    wall_s DOUBLE, skipped BOOLEAN, PRIMARY KEY (run_id, step));
CREATE TABLE IF NOT EXISTS phases (
    run_id VARCHAR, cycle INTEGER, phase VARCHAR, first_step INTEGER, last_step INTEGER,
    harness_id VARCHAR, weights_id VARCHAR, decision VARCHAR, reason VARCHAR,
    completed_at TIMESTAMP DEFAULT current_timestamp, PRIMARY KEY (run_id, cycle, phase));
-- the weight- plus harness-split rollouts the phase spent (the budget's unit)
ALTER TABLE phases ADD COLUMN IF NOT EXISTS rollouts INTEGER;
CREATE TABLE IF NOT EXISTS evals (
    run_id VARCHAR, cycle INTEGER, phase VARCHAR, harness_id VARCHAR, weights_id VARCHAR,
    split VARCHAR, k INTEGER, n_examples INTEGER, mean_at_k DOUBLE, format_rate DOUBLE,
    truncation_rate DOUBLE, rollouts INTEGER, cumulative_rollouts BIGINT,
    PRIMARY KEY (run_id, cycle, phase, harness_id, weights_id, split));
CREATE TABLE IF NOT EXISTS proposer_calls (
    run_id VARCHAR, cycle INTEGER, iteration INTEGER, proposer VARCHAR, model VARCHAR,
    input_tokens INTEGER, output_tokens INTEGER, cost_usd DOUBLE, fallback_reason VARCHAR,
    created_at TIMESTAMP DEFAULT current_timestamp, PRIMARY KEY (run_id, cycle, iteration));
-- drafts an LLM proposer tried on a few harness-split examples before submitting (charged to the
-- budget; their rollouts are not training data and score nothing, so they are not in rollouts)
CREATE TABLE IF NOT EXISTS drafts (
    run_id VARCHAR, cycle INTEGER, iteration INTEGER, draft INTEGER, harness_id VARCHAR,
    weights_id VARCHAR, rollouts INTEGER, mean_reward DOUBLE, tokens_out BIGINT,
    created_at TIMESTAMP DEFAULT current_timestamp, PRIMARY KEY (run_id, cycle, iteration, draft));
CREATE OR REPLACE VIEW ledger AS
    SELECT run_id, cycle, phase, split, count(*) AS rollouts, sum(tokens_out) AS tokens_out
    FROM rollouts GROUP BY ALL
    UNION ALL
    SELECT run_id, cycle, 'draft' AS phase, 'harness' AS split, sum(rollouts), sum(tokens_out)
    FROM drafts GROUP BY ALL;
"""
