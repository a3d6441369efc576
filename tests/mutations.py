"""Mutation check of the glue: plant one-line bugs, one at a time, each in a throw-away copy of the
repository (never in this working tree), run the tests that should notice, and print a table.

    python tests/mutations.py              # all of them (a few minutes, the notebook ones ~20 s each)
    python tests/mutations.py --only D4 cache    # those whose description or file contains D4 or cache
    python tests/mutations.py --tests-from HEAD~3 --tests tests/test_model.py   # another suite instead

A mutation is (path, exact original text, replacement, description, tests). The original text must
occur exactly once in the file, or the script stops with an error: a list gone stale after a
refactor is reported, never counted as "caught". First the union of all listed tests runs on an
unmutated copy and must pass. Exit status: 0 all caught, 1 some bug not caught, 2 some could not run
(the released data of notebook 04 absent). Not collected by pytest (the file name has no test_).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OFFICIAL = Path(os.environ.get("WORKBENCH_OFFICIAL_DATA") or ROOT / ".." / "shared" / "data" / "official_bittokens")
HAVE_DATA = (OFFICIAL / "combined_samples_long.csv").exists()


@dataclass
class Mutation:
    path: str
    original: str
    replacement: str
    description: str
    tests: list[str]
    needs_data: bool = False


NUMBERS, GENERATION = "tests/test_glue_numbers.py", "tests/test_glue_generation.py"
TRAINING, DESIDERATA = "tests/test_glue_training.py", "tests/test_glue_desiderata.py"
NOTEBOOK_VALUES = "tests/test_notebook_values.py"
NB01, NB03 = (
    NOTEBOOK_VALUES + "::test_desiderata_notebook_verdicts",
    NOTEBOOK_VALUES + "::test_training_notebook_results_are_the_test_answers_scored",
)
NB04 = NOTEBOOK_VALUES + "::test_paper_figures_notebook_reproduces_table_1_from_the_released_answers"
NB04_FIG4 = NOTEBOOK_VALUES + "::test_figure_4_draws_each_study_bar_inside_its_own_interval"
VALUES, STUDY = "tests/test_values.py", "tests/test_study.py"
RUN_DIR, PARAMETERS = "tests/test_run_directory.py", "tests/test_notebook_parameters.py"
V_RETROFIT, V_LEADERBOARD = "tests/test_values_retrofit.py", "tests/test_values_leaderboard.py"
V_STUDY, V_EXECUTORS = "tests/test_values_study.py", "tests/test_values_executors.py"
V_DISTRIBUTED, V_ZOO = "tests/test_values_distributed.py", "tests/test_values_zoo.py"
M = Mutation
MUTATIONS = [
    # 1. the number loss trains against the answer's values, with C.1's per-token normalisation
    M(
        "workbench/training/data.py",
        '"target_values": t(values[:, 1:])',
        '"target_values": t(values[:, :-1])',
        "number loss against the input's values (targets not shifted)",
        [NUMBERS],
    ),
    M(
        "workbench/training/batches.py",
        'wanted = head.loss_target(batch["target_values"]',
        'wanted = head.loss_target(batch["values"]',
        "number loss against the question-side values",
        [NUMBERS, "tests/test_gpu_path.py::test_the_number_fields_packed_ahead_give_the_plain_losses"],
    ),
    M(
        "workbench/training/batches.py",
        'targets = batch["targets"].flatten()[loss_index]',
        'targets = batch["ids"].flatten()[loss_index]',
        "number head read where a number is, not where one is predicted",
        [NUMBERS, "tests/test_gpu_path.py::test_the_number_fields_packed_ahead_give_the_plain_losses"],
    ),
    M(
        "workbench/tokenizer.py",
        "return ids, values, np.arange(len(ids)) > eoq[0]",
        "return ids, np.roll(values, 1), np.arange(len(ids)) > eoq[0]",
        "a task sample's values one token late",
        [NUMBERS],
    ),
    M(
        "workbench/model/fused.py",
        "every_x = x.new_zeros(ctx.total, x.shape[1]).index_copy_(0, rows, x)",
        "every_x = x.new_zeros(ctx.total, x.shape[1]).index_copy_(0, rows.flip(0), x)",
        "the last block's weight gradient pairs each loss row's gradient with another row's input",
        [
            "tests/test_model.py::test_the_last_block_at_the_loss_rows_gives_the_whole_blocks_loss_and_gradients_bit_for_bit"
        ],
    ),
    M(
        "workbench/training/loss.py",
        'scale = ce_count if model.cfg.loss == "per_token" else batch.number_count',
        "scale = batch.number_count",
        "per-token loss: the number term divided by the number count, not the target count",
        [NUMBERS],
    ),
    M(
        "workbench/model/gpt.py",
        "tokens[:, step], numbers[:, step] = token, value",
        "tokens[:, step], numbers[:, step] = token, 0.0",
        "generate writes 0 instead of the head's value",
        [NUMBERS],
    ),
    # 2. number head variants
    M(
        "workbench/encoders/bittokens.py",
        "nn.Sequential(nn.Linear(d_model, hidden), nn.ReLU(),",
        "nn.Sequential(nn.Linear(d_model, hidden), nn.Identity(),",
        'head="mlp" without its nonlinearity',
        [NUMBERS],
    ),
    M(
        "workbench/encoders/bittokens.py",
        "return hidden[..., : self.encoding.bits]",
        "return hidden[..., : 64]",
        'head="none" reads 64 dims also for base 10 (210 or 84 dims)',
        [NUMBERS],
    ),
    M(
        "workbench/encoders/bittokens.py",
        "return hidden[..., : self.encoding.bits]",
        "return hidden[..., -self.encoding.bits:]",
        'head="none" reads the last dims',
        [NUMBERS],
    ),
    # 3. greedy generation with the KV cache (GPT.generate, KVCache)
    M(
        "workbench/model/gpt.py",
        "next_position = positions[:, -1].to(device) + 1",
        "next_position = positions[:, -1].to(device)",
        "first generated token at the prompt's last position (off by one)",
        [GENERATION],
    ),
    M(
        "workbench/model/gpt.py",
        "next_position = positions[:, -1].to(device) + 1",
        "next_position = torch.full((B,), L)",
        "generated positions count the left padding",
        [GENERATION],
    ),
    M(
        "workbench/model/gpt.py",
        "next_position += 1",
        "next_position += 0",
        "generated positions never advance",
        [GENERATION],
    ),
    M(
        "workbench/model/gpt.py",
        "token[:, None],\n                value[:, None],\n                next_position[:, None],\n                step_mask,",
        "token[:, None],\n                torch.zeros_like(value)[:, None],\n                next_position[:, None],\n                step_mask,",
        "the head's value is not fed back",
        [GENERATION],
    ),
    M(
        "workbench/model/gpt.py",
        "cache = KVCache(len(self.blocks), real.to(device), L + max_new_tokens)",
        "cache = KVCache(len(self.blocks), torch.ones_like(real).to(device), L + max_new_tokens)",
        "generated tokens attend to the left padding",
        [GENERATION],
    ),
    M(
        "workbench/model/gpt.py",
        "self.keys[layer][:, :, start : start + n], self.values[layer][:, :, start : start + n] = k, v",
        "self.keys[layer][:, :, :n], self.values[layer][:, :, :n] = k, v",
        "new keys written over the first cached ones instead of after them",
        [GENERATION],
    ),
    M(
        "workbench/model/gpt.py",
        "(steps % check == 0 and bool(done.all()))",
        "(steps % check == 0 and bool(done.any()))",
        "generation stops when the first row is done, cutting the others short",
        [GENERATION],
    ),
    M(
        "workbench/measures/evaluate.py",
        "texts.append(_answer_text(tok, ids, values))",
        "texts.append(tok.decode(ids, values))",
        "a NaN or inf the head wrote ends the run (render refuses it)",
        [NUMBERS],
    ),
    M(
        "workbench/measures/evaluate.py",
        'cap = max_new_tokens or answer_cap(tok, chunk["answer"])',
        "cap = max_new_tokens or MAX_ANSWER_TOKENS",
        "evaluation ignores the authors' cap (longest answer of the batch + <|eos|>)",
        [NUMBERS],
    ),
    # 4. the arithmetic score
    M(
        "workbench/tasks/arithmetic.py",
        'return pd.DataFrame({"score": metrics.log_smape(pred, target),',
        'return pd.DataFrame({"score": metrics.exact_match(pred, target).astype(float),',
        "the arithmetic tasks' score rule reports exact match as the score",
        [NUMBERS],
    ),
    M(
        "workbench/tasks/lists.py",
        'score=score_numbers,\n        markers=("<|mean|>",)',
        'score=score_minmax,\n        markers=("<|mean|>",)',
        "the registry scores the mean task by accuracy",
        [NUMBERS],
    ),
    M(
        "workbench/measures/evaluate.py",
        '"score": scored["score"].to_numpy(),',
        '"score": scored["exact"].to_numpy(),',
        "evaluate() puts exact match in the score column",
        [NUMBERS],
    ),
    M(
        "workbench/measures/evaluate.py",
        'score=("score", "mean"),\n            exact=("exact", "mean"),',
        'score=("exact", "mean"),\n            exact=("exact", "mean"),',
        "summarize() averages exact match as the score",
        [NUMBERS],
    ),
    # 5. the training loop: balancer, curriculum, checkpoint choice, loss weights, A.3's hand-over
    M(
        "workbench/training/adapt.py",
        "trainer.balancer.update({**scores, **active} if balance.balance_active_set else scores)",
        "trainer.balancer.update({t: 1 - s for t, s in ({**scores, **active} if balance.balance_active_set else scores).items()})",
        "the balancer is fed 1 - score",
        [TRAINING],
    ),
    M(
        "workbench/training/adapt.py",
        'scores = summarize(answers).set_index("task")["score"].to_dict()',
        'scores = summarize(answers).set_index("task")["exact"].to_dict()',
        "the balancer and the log get exact match",
        [TRAINING],
    ),
    M(
        "workbench/training/adapt.py",
        'if balance.balancing and scores and trainer.state["warm_evaluations"] >= first:',
        "if balance.balancing and scores:",
        "the balancer starts before its warm-up ends",
        [TRAINING],
    ),
    M(
        "workbench/training/train.py",
        "max_ratio=b.max_task_ratio, floor=b.balance_floor,",
        "max_ratio=b.max_task_ratio,",
        "the balancer without its floor on 1 - p (a solved task gets no share)",
        [TRAINING],
    ),
    M(
        "workbench/training/adapt.py",
        "curriculum.update(per_level[per_level.index <= curriculum.max_difficulty].to_dict(), step + 1, lr)",
        "curriculum.update({}, step + 1, lr)",
        "the curriculum is never updated",
        [TRAINING],
    ),
    M(
        "workbench/training/adapt.py",
        "groupby(frame[column].to_numpy())",
        'groupby(frame["difficulty"].to_numpy())',
        "the curriculum is scored by the base-2 difficulty for a decimal encoding",
        [TRAINING],
    ),
    M(
        "workbench/training/train.py",
        "ratios = run.balancer.ratios if balance.balancing else None",
        "ratios = run.balancer.ratios if not balance.balancing else None",
        "batches ignore the balancer's ratios",
        [TRAINING],
    ),
    M(
        "workbench/training/adapt.py",
        "mean = metrics.generalized_mean(chosen.values(), balance.balance_lambda) if chosen else -loss",
        "mean = metrics.generalized_mean(chosen.values(), 1) if chosen else -loss",
        "checkpoint chosen by the arithmetic mean (eq. 15 asks for the harmonic)",
        [TRAINING],
    ),
    M(
        "workbench/training/adapt.py",
        "chosen = scores if evaluation.select_with_text else",
        "chosen = scores if True else",
        "--no-select-with-text still counts text's score in the checkpoint choice",
        [TRAINING],
    ),
    M(
        "workbench/training/adapt.py",
        "eligible = not evaluation.select_after_warmup or step + 1 > trainer.warmup_steps",
        "eligible = True or step + 1 > trainer.warmup_steps",
        "the best checkpoint chosen also during the lr warm-up",
        [TRAINING],
    ),
    M(
        "workbench/training/loss.py",
        "weights = task_weights[tasks] if task_weights is not None else",
        "weights = task_weights[tasks] * 0 + 1 if task_weights is not None else",
        "the model ignores the task weights (every weight 1)",
        [TRAINING],
    ),
    M(
        "workbench/training/train.py",
        "losses = step_losses(run.model, batch, weights, hidden=run.runner(batch))",
        "losses = step_losses(run.model, batch, hidden=run.runner(batch))",
        "the training step never passes the task weights",
        [TRAINING],
    ),
    M(
        "workbench/training/adapt.py",
        "weights = trainer.normalizer.update(tokens_seen)",
        "weights = trainer.normalizer.weights",
        "the loss normaliser is never updated",
        [TRAINING],
    ),
    M(
        "workbench/training/balancing.py",
        "self.weights[usable] = self.target / mean[usable]",
        "self.weights[usable] = self.target * mean[usable]",
        "the loss normaliser's weights move the wrong way (x mean instead of / mean)",
        [TRAINING],
    ),
    M(
        "workbench/training/curriculum.py",
        "return step >= (1 - self.endgame_share) * self.total_steps",
        "return False",
        "A.3: Sampler.in_endgame never true (BitTokens never hand over to the decimal pool)",
        [TRAINING],
    ),
    M(
        "workbench/training/batches.py",
        "lambda task, n, r: self.sampler.sample(task, n, step, r),",
        "lambda task, n, r: self.sampler.sample(task, n, 0, r),",
        "the sampler is always told step 0 (no hand-over, no end phase)",
        [TRAINING],
    ),
    # 5b. values followed to where they are used (issue 23): the schedule, the curricula's warm-up,
    # what pack keeps, the validation split, every state a resume restores
    M(
        "workbench/training/train.py",
        "lr = apply_schedule(run.optimizers, step, run.total_steps, run.cfg.optim)",
        "lr = apply_schedule(run.optimizers, step, run.total_steps)",
        "the lr schedule ignores the run's optimizer flags (groups step with the defaults)",
        [VALUES],
    ),
    M(
        "workbench/training/adapt.py",
        "1.0, warmup_frac=warmup_frac, levels=held[t]",
        "1.0, levels=held[t]",
        "the curricula's eq. 14 uses the default lr warm-up, not the run's",
        [VALUES],
    ),
    M(
        "workbench/training/data.py",
        "order = rng.permutation(len(chosen))",
        "order = np.arange(len(chosen))",
        "draw stops shuffling: the task drawn last loses the samples pack cannot fit",
        [VALUES],
    ),
    M(
        "workbench/training/data.py",
        "return [self[i] for i in np.asarray(indices, dtype=np.int64).tolist()]",
        "return [self[i] for i in sorted(np.asarray(indices, dtype=np.int64).tolist())]",
        "a lazy pool's take returns the drawn samples in index order, not in the order drawn",
        ["tests/test_pools.py"],
    ),
    M(
        "workbench/study/length.py",
        "length_questions(length, r.seed, n)",
        "length_questions(length, 0, n)",
        "the length axis asks every run seed 0's questions",
        ["tests/test_length.py"],
    ),
    M(
        "workbench/study/length.py",
        'if len(done) and (set(done["length"]) != set(lengths) or set(done["n"]) != {n}):',
        "if False:",
        "the length axis appends answers at other lengths to a file scored before",
        ["tests/test_length.py"],
    ),
    M(
        "workbench/study/parts.py",
        "runs[ten:ten] = study4_lr_plan()",
        "runs += study4_lr_plan()",
        "Study 4's learning-rate check trains after the 10M level, against the registered order",
        ["tests/test_paired.py"],
    ),
    M(
        "workbench/training/train.py",
        'val = {t: make_pool(t, cfg.evaluation.val_samples, tok, cfg.seed, "val", cfg.regime).frame',
        'val = {t: make_pool(t, cfg.evaluation.val_samples, tok, cfg.seed, "train", cfg.regime).frame',
        "validation questions taken from the training split",
        [VALUES],
    ),
    M(
        "workbench/training/train.py",
        'run.state = ckpt["state"]',
        'run.state = {**ckpt["state"], "best": -1.0}',
        "a resume loses the best checkpoint's score",
        [VALUES],
    ),
    M(
        "workbench/training/train.py",
        'run.state = ckpt["state"]',
        'run.state = {**ckpt["state"], "seconds": 0.0}',
        "a resume restarts the training clock",
        [VALUES],
    ),
    M(
        "workbench/training/train.py",
        'run.balancer.load_state_dict(ckpt["balancer"])',
        "run.balancer.load_state_dict(run.balancer.state_dict())",
        "a resume loses the balancer's ratios",
        [VALUES],
    ),
    M(
        "workbench/training/train.py",
        'run.rng.bit_generator.state = json.loads(ckpt["rng"])',
        "pass",
        "a resume restarts the sampling random state",
        [VALUES],
    ),
    # 5b'. the authors' C.4 rules (issue 24): weights set after the warm-up, the first ratio update one
    # evaluation later, the cap on eq. 16's target, the binary set's score in A.3's binary phase
    M(
        "workbench/config.py",
        "loss_weight_momentum: float = setting(\n        0.0,",
        "loss_weight_momentum: float = setting(\n        0.5,",
        "after the warm-up the loss weights move halfway instead of being set",
        [TRAINING],
    ),
    M(
        "workbench/training/adapt.py",
        'first = 2 if balance.balance_start == "next_evaluation" else 1',
        "first = 1",
        "the balancer updates at the warm-up's own evaluation",
        [TRAINING],
    ),
    M(
        "workbench/training/balancing.py",
        'if max_ratio is not None and cap == "target":',
        "if False:",
        "the cap bounds the mixed ratios, not eq. 16's target",
        ["tests/test_balancing.py"],
    ),
    M(
        "workbench/training/adapt.py",
        "trainer.balancer.update({**scores, **active} if balance.balance_active_set else scores)",
        "trainer.balancer.update(scores)",
        "BitTokens' binary phase balanced on the decimal validation score",
        [TRAINING],
    ),
    # 5c. the study's statistics and what notebook 04 draws from them
    M(
        "workbench/study/stats.py",
        "low, high = np.quantile(means, [0.025, 0.975])",
        "low, high = np.quantile(means, [0.05, 0.95])",
        "90 % bootstrap intervals labelled 95 %",
        [STUDY],
    ),
    M(
        "workbench/study/stats.py",
        'both[f"low_{a}"] > both[f"high_{b}"], a, np.where(',
        'both[f"low_{a}"] >= both[f"high_{b}"], a, np.where(',
        "touching intervals counted as apart",
        [STUDY],
    ),
    M(
        "workbench/study/stats.py",
        "(int(differ.digits.iloc[0]), differ.ahead.iloc[0])",
        "(int(differ.digits.iloc[-1]), differ.ahead.iloc[-1])",
        "the first difference taken at the largest d",
        [STUDY],
    ),
    M(
        "notebooks/04_paper_figures.py",
        "intervals = study_intervals[study_intervals.study == fig4_part]",
        'intervals = study_intervals[study_intervals.study == "multitask_numeric"]',
        "Figure 4 draws Study 2b's error bars over another part's bars",
        [NB04_FIG4],
    ),
    # 5d. safe to share (issue 25): one writer per folder, finished means the planned configuration,
    # parameters are JSON, the memory check counts the questions, a refused resume names what differs
    M(
        "workbench/training/train.py",
        'with hold(cfg.run.out) if int(os.environ.get("RANK", 0)) == 0 else nullcontext():',
        "with nullcontext():",
        "two processes may train into one run directory",
        [RUN_DIR],
    ),
    M(
        "workbench/study/run.py",
        "if finished(cfg) and (differ := recorded_differences(cfg)):",
        'if finished(cfg) and (differ := ""):',
        "a finished run of another configuration passes as the plan's",
        [STUDY],
    ),
    M(
        "workbench/notebook_parameters.py",
        "        check_json(value, key)",
        "        pass",
        "notebook parameters not checked for JSON (code from a parameter)",
        [PARAMETERS],
    ),
    M(
        "workbench/runs/memory.py",
        "    data = data_bytes(cfg, tok) if tok is not None else 0",
        "    data = 0",
        "the memory check ignores the questions",
        [RUN_DIR],
    ),
    M(
        "workbench/runs/folder.py",
        'differ = config_differences(ckpt["config"], cfg, ignore=RESUMABLE)',
        'differ = ""',
        "a resume of another configuration is not refused",
        [RUN_DIR],
    ),
    # 6. desiderata D4 and D7
    M(
        "workbench/measures/desiderata.py",
        "x = sample_values(n_per_decade, seed + k - lo, k, k + 1, max_digits=15)",
        "x = sample_values(n_per_decade, seed + k - lo, k - 1, k, max_digits=15)",
        "D4 samples the decade below the one it reports",
        [DESIDERATA],
    ),
    M(
        "workbench/measures/desiderata.py",
        "err = _relative_error(_round_trip_or_lost(codec, x), target)",
        "err = _relative_error(_round_trip_or_lost(codec, x), x)",
        "D4 compares unsigned encodings with the signed x",
        [DESIDERATA],
    ),
    M(
        "workbench/measures/desiderata.py",
        "median_rel_error=float(np.median(err)),\n                    max_rel_error",
        "median_rel_error=float(np.mean(err)),\n                    max_rel_error",
        "D4 reports the mean as the median",
        [DESIDERATA],
    ),
    M(
        "workbench/measures/desiderata.py",
        "grid = np.linspace(0.0, 2.0 * t, points)",
        "grid = np.linspace(0.0, t, points)",
        "D7 curves stop at the target instead of 2t",
        [DESIDERATA],
    ),
    M(
        "workbench/measures/desiderata.py",
        "losses = losses.tolist()",
        "losses = losses.flip(0).tolist()",
        "D7 losses paired with the wrong predictions",
        [DESIDERATA],
    ),
    M(
        "workbench/measures/desiderata.py",
        'spearman=_spearman(np.abs(g["prediction"] - t), g["loss"])',
        'spearman=_spearman(g["prediction"], g["loss"])',
        "D7 continuity against p instead of |p - t|",
        [DESIDERATA],
    ),
    # 7. what the notebooks compute
    M(
        "notebooks/01_desiderata.py",
        'disagreements = agree[agree["verdict"] != agree["paper"]]',
        'disagreements = agree[agree["verdict"] == agree["paper"]]',
        "notebook 01 counts agreements as disagreements",
        [NB01],
    ),
    M(
        "workbench/measures/desiderata.py",
        "exact=float(_same(decoded, target).mean()),\n                collisions",
        "exact=float(_same(decoded, x).mean()),\n                collisions",
        "D2 compares unsigned encodings with the signed x (FoNE's verdict)",
        [NB01],
    ),
    M(
        "workbench/training/train.py",
        "samples = run.answer(questions)",
        "samples = run.answer({t: run.val[t] for t in questions})",
        "the test summary scores the validation questions",
        [NB03],
    ),
    M(
        "workbench/results.py",
        'assign(metric="exact_match", value=numeric["exact"])',
        'assign(metric="exact_match", value=numeric["score"])',
        "results table: exact match carries the score",
        [NB03],
    ),
    M(
        "workbench/measures/evaluate.py",
        "assign(tokens=summary.input_tokens + summary.output_tokens)",
        "assign(tokens=summary.input_tokens)",
        "tokens per problem (Table 5) without the answer's tokens",
        [NB03],
    ),
    M(
        "workbench/figures/paper/sources.py",
        'performance=("performance", "mean")',
        'performance=("performance", "median")',
        "frontier means recomputed as medians (notebook 04's Table 1 check)",
        [NB04],
        needs_data=True,
    ),
    # 8. tolerances
    M(
        "workbench/metrics.py",
        "EPS = 1e-100",
        "EPS = 1e-30",
        "log-sMAPE epsilon 1e-30 instead of eq. 1's 1e-100",
        ["tests/test_metrics.py::test_log_smape_at_tiny_magnitudes_where_eps_matters"],
    ),
    M(
        "workbench/metrics.py",
        "MAX_DIGITS = 15",
        "MAX_DIGITS = 16",
        "exact match on 16 digits instead of 15",
        ["tests/test_metrics.py::test_exact_match_decides_at_the_15th_significant_digit"],
    ),
    M(
        "workbench/tasks/exact.py",
        "if 2 * r > b or (2 * r == b and q % 2 == 1):",
        "if 2 * r >= b:",
        "labels round half-up instead of half-even (a few ties in 3000)",
        ["tests/test_tasks.py::test_labels_match_independent_oracle"],
    ),
    M(
        "workbench/tasks/arithmetic.py",
        'rel = np.where(\n        (op == "+") | (op == "-"), 4 * EPS_LD * np.nan_to_num(cancel.astype(np.float64), posinf=1e300), 6 * EPS_LD\n    )',
        "rel = np.full(r.shape, -6 * EPS_LD)",
        "arithmetic labels without their error bound (2 of 3000 additions off in the last digit)",
        ["tests/test_tasks.py::test_labels_match_independent_oracle"],
    ),
    # speed-ups that must keep every bit (issue 29)
    M(
        "workbench/training/optim.py",
        '**({"fused": True} if on_gpu else {"foreach": True}),',
        "",
        "Adam back to one call per tensor (foreach off)",
        ["tests/test_optim.py::test_adam_runs_foreach_and_steps_bit_for_bit_like_torchs_per_tensor_adam"],
    ),
    M(
        "workbench/training/train.py",
        "    keep_freed_memory(run.device)  # the steps",
        "    pass  # the steps",
        "CPU training leaves glibc's thresholds alone (every step faults in fresh pages again)",
        ["tests/test_allocator.py::test_cpu_training_keeps_freed_memory"],
    ),
    M(
        "workbench/retrofit/finetune.py",
        "    keep_freed_memory(job.lm.device)  # the steps",
        "    pass  # the steps",
        "CPU fine-tuning leaves glibc's thresholds alone",
        ["tests/test_retrofit.py::test_cpu_fine_tuning_keeps_freed_memory"],
    ),
    M(
        "workbench/runs/allocator.py",
        "mallopt(M_TRIM_THRESHOLD, TRIM_BYTES)",
        "mallopt(M_TRIM_THRESHOLD, 128 << 10)",
        "the heap's top trimmed back to the kernel after every step",
        ["tests/test_allocator.py::test_training_steps_reuse_their_memory_instead_of_faulting_in_pages"],
    ),
    M(
        "workbench/model/cpu_kernels.c",
        "o[i] = fmaf(-y2, s[i], y1 * c[i]);",
        "o[i] = y1 * c[i] - y2 * s[i];",
        "the C RoPE rounds a product that PyTorch's addcmul fuses",
        ["tests/test_cpu_kernels.py::test_the_kernels_give_pytorchs_bits_forward_and_backward"],
    ),
    M(
        "workbench/model/cpu_kernels.c",
        "gx[i] = fmaf(-(xr[i] * r), m, gy[i]) * r;",
        "gx[i] = (gy[i] - xr[i] * r * m) * r;",
        "the C QK-norm backward rounds where PyTorch's does not",
        ["tests/test_cpu_kernels.py::test_the_kernels_give_pytorchs_bits_forward_and_backward"],
    ),
    M(
        "workbench/model/fused.py",
        "and torch.get_num_threads() == 1\n        and _kernels_agree(x.shape[-1])",
        "and _kernels_agree(x.shape[-1])",
        "the single-threaded C kernels run beside PyTorch's other threads",
        ["tests/test_cpu_kernels.py::test_more_than_one_thread_takes_the_pytorch_path"],
    ),
    M(
        "workbench/model/fused.py",
        "and torch.get_num_threads() == 1\n        and _kernels_agree(x.shape[-1])",
        "and torch.get_num_threads() == 1\n        and cpu_kernels.library() is not None",
        "C kernels used without the bit-for-bit check against PyTorch",
        ["tests/test_cpu_kernels.py::test_kernels_that_differ_from_pytorch_are_not_used"],
    ),
    M(
        "workbench/model/gpt.py",
        'return norm_rotate(x, cos, sin) if kind == "rms"',
        'return rotate(rms_norm(x), cos, sin) if kind == "rms"',
        "the model never takes the C kernels",
        ["tests/test_cpu_kernels.py::test_training_steps_take_the_kernels_and_lose_no_bit"],
    ),
    M(
        "benchmarks/study_profile.py",
        '(batches, "next_batch", "data"),',
        '(batches, "next_batch", "data"), (batches, "shard", "data"),',
        "a benchmark times a function the package no longer has",
        ["tests/test_benchmarks.py::test_benchmark_runs_at_its_smallest_size"],
    ),
    # 9. values where the new rooms use them (issue 40): each against an independent oracle
    M(
        "workbench/retrofit/finetune.py",
        '{"params": head, "lr": cfg.head_lr, "initial_lr": cfg.head_lr}',
        '{"params": head, "lr": cfg.lr, "initial_lr": cfg.lr}',
        "retrofit: the number head steps with --lr, not --head-lr",
        [V_RETROFIT + "::test_each_group_steps_with_its_own_lr_on_the_schedule_of_the_flags"],
    ),
    M(
        "workbench/retrofit/finetune.py",
        "mult = lr_multiplier(step, job.total_steps, cfg.warmup_frac)",
        "mult = lr_multiplier(step, job.total_steps)",
        "retrofit: the steps' lr warm-up is the default's, not --warmup-frac",
        [V_RETROFIT + "::test_each_group_steps_with_its_own_lr_on_the_schedule_of_the_flags"],
    ),
    M(
        "workbench/retrofit/finetune.py",
        "return {n: p.detach().cpu().clone() for n, p in lm.named_parameters() if p.requires_grad}",
        "return {n: p.detach().cpu() for n, p in lm.named_parameters() if p.requires_grad}",
        "retrofit: the best weights alias the live ones on a CPU (the last step's are saved and tested)",
        [V_RETROFIT + "::test_the_saved_model_the_test_answers_and_the_after_perplexity_are_the_best_evaluations"],
    ),
    M(
        "workbench/retrofit/finetune.py",
        '"loss_mask": t(mask[:, 1:] & real[:, 1:])',
        '"loss_mask": t(mask[:, :-1] & real[:, 1:])',
        "retrofit: the loss mask read at the input token (an answer's first token unlearned)",
        [V_RETROFIT + "::test_the_loss_is_read_at_the_answers_targets_from_its_first_token_to_eos"],
    ),
    M(
        "workbench/retrofit/finetune.py",
        "numeric[r, : len(n) - 1] = torch.from_numpy(n[1:])",
        "numeric[r, : len(n) - 1] = torch.from_numpy(n[:-1])",
        "retrofit: perplexity's numeric/text split read at the input token",
        [V_RETROFIT + "::test_the_saved_model_the_test_answers_and_the_after_perplexity_are_the_best_evaluations"],
    ),
    M(
        "workbench/leaderboard.py",
        'board.groupby(["protocol", "task", "digits"])',
        'board.groupby(["protocol", "task"])',
        "leaderboard: ranks counted over every d of a task",
        [V_LEADERBOARD],
    ),
    M(
        "workbench/leaderboard.py",
        "(group.low > high)",
        "(group.low >= high)",
        "leaderboard: a touching interval counted as entirely above",
        [V_LEADERBOARD],
    ),
    M(
        "workbench/leaderboard.py",
        '(group["mean"] - mean > delta)',
        '(group["mean"] - mean > 0)',
        "leaderboard: a gap within the cross-CPU spread ranked as a difference",
        [V_LEADERBOARD],
    ),
    M(
        "workbench/leaderboard.py",
        "short = board[board.seeds < board.protocol.map(PROTOCOL_SEEDS)]",
        "short = board[board.seeds < 1]",
        "leaderboard: a cell of fewer seeds than its protocol ranked without a word",
        [
            "tests/test_leaderboard_own.py::test_an_own_cell_of_fewer_seeds_than_its_protocol_is_refused_or_shown_with_a_warning"
        ],
    ),
    # study rows checked where they enter; publish keeps every byte
    M(
        "workbench/study/rows.py",
        'outside = (typed["low"] > typed["mean"] + SLACK) | (typed["mean"] > typed["high"] + SLACK)',
        'outside = typed["low"] > typed["high"]',
        "study rows: a mean outside its own interval accepted",
        ["tests/test_study_rows.py"],
    ),
    M(
        "workbench/study/rows.py",
        "    more = joined.seeds > joined.held\n",
        "    more = joined.seeds < 0\n",
        "study rows: an interval claiming more seeds than the results hold accepted",
        ["tests/test_study_rows.py"],
    ),
    M(
        "workbench/study/published.py",
        'ending = "\\r\\n" if first.endswith("\\r\\n") else "\\n"',
        'ending = "\\n"',
        "publish: rows appended to a CRLF file with LF",
        ["tests/test_publish.py"],
    ),
    # a resume trusts only a record of the machine that agrees with the checkpoint's own copy
    M(
        "workbench/runs/provenance.py",
        "differ = [key for key in PROVENANCE if key in kept[-1] and kept[-1][key] != record.get(key)]",
        "differ = []",
        "resume: an edited environment.json believed over the checkpoint's copy",
        [RUN_DIR + "::test_a_resume_refuses_a_record_of_the_machine_it_cannot_trust"],
    ),
    M(
        "workbench/study/stats.py",
        'small = (both[f"mean_{a}"] - both[f"mean_{b}"]).abs() <= delta',
        'small = (both[f"mean_{a}"] - both[f"mean_{b}"]).abs() < 0',
        "study verdicts call a gap within the cross-CPU spread a difference",
        ["tests/test_study.py"],
    ),
    M(
        "workbench/study/stats.py",
        "chosen = rng.integers(0, len(per_seed), len(per_seed))",
        "chosen = np.arange(len(per_seed))",
        "bootstrap: the seeds never resampled (the seeds' spread ignored)",
        [V_STUDY],
    ),
    M(
        "workbench/study/stats.py",
        "per_seed[i][rng.integers(0, len(per_seed[i]), len(per_seed[i]))].mean()",
        "per_seed[i].mean()",
        "bootstrap: the questions within a seed never resampled",
        [V_STUDY],
    ),
    M(
        "workbench/study/stats.py",
        "return float(np.mean([s.mean() for s in per_seed]))",
        "return float(np.concatenate(per_seed).mean())",
        "bootstrap: the point estimate pools the questions of all seeds",
        [V_STUDY],
    ),
    M(
        "workbench/study/stats.py",
        "(wide >= threshold)",
        "(wide > threshold)",
        "Study 2's criterion: a mean of exactly 0.9 not counted",
        [V_STUDY],
    ),
    M(
        "workbench/runs/executors.py",
        "[(out / n).resolve() for n in names]",
        "[(out / n).resolve() for n in todo]",
        "submitit: a later array trains into the first array's folders",
        [V_EXECUTORS],
    ),
    M(
        "workbench/runs/executors.py",
        "names, waiting = waiting[: limit - len(running)], waiting[limit - len(running) :]",
        "names, waiting = waiting[:limit], waiting[limit:]",
        "submitit: a new array of the full parallelism while jobs still run",
        [V_EXECUTORS],
    ),
    M(
        "workbench/runs/distributed.py",
        "share = math.ceil(len(texts) / world)",
        "share = len(texts) // world",
        "perplexity_shared: the texts left over by an uneven split never scored",
        [V_DISTRIBUTED],
    ),
    M(
        "workbench/runs/distributed.py",
        "answered = sorted((k, part) for parts in gathered for k, part in parts)",
        "answered = [(k, part) for parts in gathered for k, part in parts]",
        "evaluate_shared: answers gathered in rank order, not in the questions' order",
        [V_DISTRIBUTED],
    ),
    M(
        "workbench/encoders/abacus.py",
        "torch.randint(0, self.encoding.max_offset + 1,",
        "torch.randint(0, self.encoding.max_offset,",
        "Abacus: the largest offset is never drawn",
        [V_ZOO],
    ),
    M(
        "workbench/encoders/log_xval.py",
        "        if self.training and out.requires_grad:  # a training step; never a measurement of an ideal output\n"
        "            self.observe(s)\n        z = self.output_of(s[:, None])",
        "        z = self.output_of(s[:, None])\n"
        "        if self.training and out.requires_grad:  # a training step; never a measurement of an ideal output\n"
        "            self.observe(s)",
        "log-scaled xVal: a batch z-scored before it joins the running statistics",
        [V_ZOO],
    ),
    M(
        "workbench/measures/perplexity.py",
        '"numeric": t(numeric[:, 1:] & target)',
        '"numeric": t(numeric[:, :-1] & target)',
        "perplexity: the numeric/text split read at the input token",
        [V_ZOO],
    ),
    # issue 66's last "Low" bullet: each planted bug checked where its value is used
    M(
        "workbench/study/published.py",
        "        if not cells:\n            continue\n",
        "        if not cells:\n            break\n",
        "merging own study folders: an empty one drops the folders after it",
        ["tests/test_study_rows.py::test_merging_own_folders_skips_an_empty_one_and_keeps_every_folder_after_it"],
    ),
    M(
        "workbench/study/questions.py",
        'text = {c: str for c in ("prompt", "answer", "prediction")}',
        'text = {c: str for c in ("prompt", "answer")}',
        'appending scored answers re-reads the earlier predictions as numbers ("007" as 7.0)',
        ["tests/test_study_rows.py::test_appending_scored_answers_keeps_the_earlier_rows_as_written"],
    ),
    M(
        "workbench/runs/dryrun.py",
        "wall = max(sum(seconds) / max(1, min(parallel, len(pending))), max(seconds))",
        "wall = sum(seconds) / max(1, min(parallel, len(pending)))",
        "dry run: the side-by-side wall time ignores the plan's longest run",
        ["tests/test_experiments.py::test_dry_run_wall_time_is_never_shorter_than_the_longest_run"],
    ),
    M(
        "workbench/retrofit/hub.py",
        'if dtypes := sorted(_stored_dtypes(folder) - {"F32"}):',
        'if dtypes := sorted(_stored_dtypes(folder) - {"F32", "BF16", "F16"}):',
        "GGUF cache: a conversion stored in half precision taken as the float32 one promised",
        ["tests/test_model_cache.py::test_weights_not_stored_as_float32_are_refused_by_the_check"],
    ),
    M(
        "workbench/retrofit/hub.py",
        "model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)",
        "model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)",
        "GGUF conversion: the model saved in bfloat16, not the float32 promised",
        ["tests/test_model_cache.py::test_the_real_gguf_is_stored_in_float32_on_disk_with_its_full_precision"],
    ),
    M(
        "workbench/retrofit/hub.py",
        "loaded = AutoModelForCausalLM.from_pretrained(path.parent, dtype=torch.float32, **kwargs)",
        "loaded = AutoModelForCausalLM.from_pretrained(path.parent, dtype=torch.bfloat16, **kwargs)",
        "GGUF conversion: de-quantized through bfloat16, then stored as float32",
        ["tests/test_model_cache.py::test_the_real_gguf_is_stored_in_float32_on_disk_with_its_full_precision"],
    ),
    M(
        "workbench/measures/perplexity.py",
        "(ids >= len(tok.special_tokens)) & (ids < tok.offset)",
        "(ids > len(tok.special_tokens)) & (ids < tok.offset)",
        "perplexity: the first number piece (the boundary after the special tokens) counted as text",
        ["tests/test_perplexity.py::test_numeric_mask_at_the_vocabulary_boundaries"],
    ),
    M(
        "workbench/measures/perplexity.py",
        "(ids >= len(tok.special_tokens)) & (ids < tok.offset)",
        "(ids >= len(tok.special_tokens)) & (ids <= tok.offset)",
        "perplexity: the first text token (the boundary before the text) counted as numeric",
        ["tests/test_perplexity.py::test_numeric_mask_at_the_vocabulary_boundaries"],
    ),
    M(
        "workbench/encoders/place_value.py",
        "range(self.max_place, self.min_place - 1, -1)",
        "range(self.max_place, self.min_place, -1)",
        "place value: no tokens for the place min_place",
        [V_ZOO],
    ),
    M(
        "workbench/encoders/scientific.py",
        "range(-self.max_exponent, self.max_exponent + 1)",
        "range(-self.max_exponent, self.max_exponent)",
        "scientific: no token for the exponent +max_exponent",
        [V_ZOO],
    ),
]


def copy_repository(dest: Path, tests_from: str | None = None) -> None:
    """The tracked and untracked-but-not-ignored files of the working tree, as they are now;
    with `tests_from`, tests/ as it was at that git revision."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    if tests_from:
        shutil.rmtree(dest / "tests")
        archive = subprocess.run(["git", "archive", tests_from, "tests"], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def original_text(copy: Path, m: Mutation) -> str:
    """The file's text; stops the script if the original text is not in it exactly once."""
    path = copy / m.path
    text = path.read_text() if path.is_file() else ""
    found = text.count(m.original)
    if found != 1:
        raise SystemExit(
            f"STALE MUTATION LIST: {m.path} holds {found} copies of {m.original!r} (need exactly 1): {m.description}"
        )
    if m.path.endswith(".py"):  # a planted bug that breaks the syntax would count as caught by any test
        try:
            compile(text.replace(m.original, m.replacement), m.path, "exec")
        except SyntaxError as err:
            raise SystemExit(
                f"MUTATION DOES NOT COMPILE: {m.description} ({m.path}: {err.msg}, line {err.lineno})"
            ) from None
    return text


def plant(copy: Path, m: Mutation) -> None:
    (copy / m.path).write_text(original_text(copy, m).replace(m.original, m.replacement))


def pytest(copy: Path, tests: list[str]) -> tuple[int, list[str], str]:
    """Run the tests in the copy, its own package first on the path -> (exit code, failed tests, output)."""
    env = {**os.environ, "PYTHONPATH": str(copy), "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    if HAVE_DATA:
        env["WORKBENCH_OFFICIAL_DATA"] = str(OFFICIAL.resolve())
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-rfE", *tests],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
    )
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", done.stdout, re.M)
    return done.returncode, failed, done.stdout + done.stderr


def check_copy_is_imported(copy: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    where = subprocess.run(
        [sys.executable, "-c", "import workbench; print(workbench.__file__)"],
        cwd=copy,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(copy.resolve()):
        raise SystemExit(
            f"the copy's tests would import {where}, not the copy's workbench: mutations would be invisible"
        )


def run_one(copy: Path, m: Mutation, tests: list[str], tests_from: str | None) -> tuple:
    """Plant `m` in a fresh copy, run `tests` -> (description, file, caught?, catching test, seconds)."""
    copy_repository(copy, tests_from)
    plant(copy, m)
    started = time.time()
    code, failed, output = pytest(copy, tests)
    caught = "yes" if code == 1 and failed else "NO" if code == 0 else f"ERROR (pytest exit {code})"
    if caught != "yes":
        print(output[-2000:])
    shutil.rmtree(copy)
    return m.description, m.path, caught, failed[0] if failed else "-", time.time() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", help="run only mutations whose file or description contains one of these")
    parser.add_argument("--tests", nargs="+", help="run these tests for every mutation instead of its own")
    parser.add_argument("--tests-from", metavar="REV", help="take tests/ from this git revision (with --tests)")
    args = parser.parse_args(argv)
    if args.tests_from and not args.tests:
        raise SystemExit("--tests-from needs --tests: the mutations' own tests may not exist at that revision")
    chosen = [m for m in MUTATIONS if not args.only or any(o in m.path or o in m.description for o in args.only)]
    if not chosen:
        raise SystemExit(f"no mutation matches {args.only!r}")
    started = time.time()
    runnable = [m for m in chosen if HAVE_DATA or not m.needs_data]
    tests_of = lambda m: args.tests or m.tests
    with tempfile.TemporaryDirectory(prefix="mutations-") as tmp:
        base = Path(tmp) / "baseline"
        copy_repository(base, args.tests_from)
        check_copy_is_imported(base)
        for m in chosen:  # every original must be there before anything runs
            original_text(base, m)
        tests = sorted({t for m in runnable for t in tests_of(m)})
        code, failed, output = pytest(base, tests)
        if code != 0:
            print(output[-3000:])
            raise SystemExit(f"the unmutated copy fails its tests ({failed}); fix that first")
        print(f"baseline: {len(tests)} test selections pass on the unmutated copy ({time.time() - started:.0f} s)\n")
        rows = []
        for i, m in enumerate(chosen):
            if m in runnable:
                rows.append(run_one(Path(tmp) / f"m{i}", m, tests_of(m), args.tests_from))
            else:
                rows.append((m.description, m.path, "not run (no released data)", "-", 0.0))
            print(f"[{i + 1}/{len(chosen)}] {rows[-1][2]:>4}  {m.description}", flush=True)
    print()
    print(table(rows))
    missed = [r for r in rows if r[2] not in ("yes", "not run (no released data)")]
    skipped = [r for r in rows if r[2] == "not run (no released data)"]
    print(
        f"\n{len(rows) - len(missed) - len(skipped)} of {len(rows)} planted bugs caught"
        + (f", {len(missed)} NOT caught" if missed else "")
        + (f", {len(skipped)} not run" if skipped else "")
        + f"; total time {time.time() - started:.0f} s"
    )
    return 1 if missed else 2 if skipped else 0


def table(rows) -> str:
    head = ("bug", "file", "caught?", "catching test", "s")
    body = [(d, f, c, t, f"{s:.0f}") for d, f, c, t, s in rows]
    widths = [max(len(str(r[i])) for r in [head, *body]) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(str(v).ljust(w) for v, w in zip(r, widths)) + " |"
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, body)])


if __name__ == "__main__":
    sys.exit(main())
