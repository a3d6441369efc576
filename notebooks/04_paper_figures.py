# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 — The paper's figures
#
# Figures 2-8 of the BitTokens paper rebuilt from what we have:
#
# * the paper's own tables (1-15, transcribed in `workbench.frontier.paper`): Figures 2 and 3 and
#   the paper's rows of Figure 4 — always;
# * the authors' released files (per-sample frontier results, the 500-question benchmark per task),
#   read from `official_data` (by default the documented folder, `$WORKBENCH_OFFICIAL_DATA` or
#   `../shared/data/official_bittokens`, when it is there): Tables 1 and 3 recomputed from the
#   answers, the per-difficulty curves, Figure 7 (the benchmark beside our generator's test split)
#   and Figure 8; without them these are left out;
# * our task generator (Figures 5 and 6: the operand exponents of the training data);
# * our laptop-scale study (docs/study/; `study_dir` holds `cpu-study.csv` and
#   `cpu-study-intervals.csv`, made by `python -m workbench.experiments study`): Study 1's precision
#   sweep, and Study 2 or 2b as the third row of Figure 4; a list of folders is merged in order
#   (`["results", "runs/study"]`: your study's cells over the published ones, results/ only read),
#   so that your own encoding joins the leaderboard;
# * or, for Figure 4's third row, `results_csv`: a CSV in the results schema of
#   `workbench.results` (encoding, task, metric, value, seed), e.g. the `results.csv` of
#   notebook 03.
# * a folder of raw model answers (`answers_dir`): the authors' per-answer CSVs or our client's
#   JSONL, rescored with the paper's rules and with a careful reading (Tables 1 and 2 side by side).
#
# The data preparation lives in `workbench/figures/paper/`, one module per figure family, and is tested there.

# %% tags=["parameters"]
official_data: str | None = "auto"  # folder of the released files; "auto": $WORKBENCH_OFFICIAL_DATA, else ../shared/data/official_bittokens, when present; None: without them
study_dir: str | list[str] | None = "results"  # folder of cpu-study.csv and cpu-study-intervals.csv (from the repo root), or a list merged in order (["results", "runs/study"]: yours over the published; results/ is only read); None: skip
fig4_part: str | None = "multitask"  # Figure 4's third row: Study 2 ("multitask", the protocol's row: Study 2b met no criterion) or Study 2b ("multitask_numeric"); None: no study row
results_csv: str | None = None  # Figure 4's third row from your own results CSV instead of the study's
exponent_samples = 100_000  # training questions drawn from our generator for Figures 5 and 6
generator_samples = 2000  # test questions per task from our generator beside the released benchmark (Figure 7)
bootstrap_draws = 200  # resamples per sample count (Figure 8)
seed = 0  # seed of the generator's questions and of the bootstrap
figures_dir: str | None = None  # None: runs/figures (`make figures` passes figures/)
figure_formats = ["html", "png"]  # any of html, png, svg
answers_dir: str | None = None  # folder of raw model answers to rescore (paper vs careful reading); None: skip
study4 = True  # draw Study 4 from its kept runs in results/runs/ (curves, plateau, verdicts); False: skip that section

# %%
import os
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from workbench import encoders, experiments, leaderboard, study
from workbench.figures import paper as pf
from workbench.figures import plots
from workbench.frontier import answer_folders
from workbench.notebooks import ROOT
from workbench.results import PERPLEXITIES, read_results
from workbench.tasks import generate

os.chdir(ROOT)  # the repository root, as under the runner: relative paths mean the same in the lab

for key, value in (("exponent_samples", exponent_samples), ("generator_samples", generator_samples)):
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{key} must be a positive integer, got {value!r}")
folder = pf.sources.released_folder(official_data)
print("released data:", folder if folder is not None else "not used (official_data=None or the folder is absent)")
results, intervals, source = None, None, None
study_dirs = [study_dir] if isinstance(study_dir, str) else study_dir or []
if study_dir is not None:
    study_table, study_intervals = study.read_studies(study_dirs)  # merged in order; nothing written
    parts = [p for p in study.MULTITASK_PARTS if p in set(study_table.study)]
    if fig4_part is not None and fig4_part not in parts:
        raise ValueError(f"fig4_part must be a multi-task part that study_dir {study_dir!r} holds, one of {parts}; got "
                         f"{fig4_part!r}: fig4_part=None draws Figure 4 without a study row, and study_dir=[\"results\", "
                         "<your folder>] puts your study's cells beside the published ones")
if study_dir is not None and fig4_part is not None:
    results = study.fig4_results(study_table, fig4_part)
    source = f"{study.PART_LABELS[fig4_part]}; docs/study/"
    intervals = study_intervals[study_intervals.study == fig4_part]
if results_csv is not None:
    results, intervals, source = read_results(results_csv), None, results_csv
samples = pf.sources.official_samples(folder) if folder is not None else None
formats = tuple(figure_formats)


def save(fig, name):
    plots.save(fig, name, figures_dir, formats)
    return fig


# %% [markdown]
# ## Frontier LLMs: Figures 2 and 3
#
# Eight frontier models, each with maximal and minimal (or no) reasoning, answered 500 questions
# per task. Table 1 gives log-sMAPE (eq. 2) for the arithmetic tasks and exact-match accuracy for
# MinMax, Interval and Sorting; Table 3 the mean tokens each model generated per problem. Figures 2
# and 3 are drawn from these printed tables. With the released per-sample file the same means are
# recomputed from the 58 500 answers and compared with the tables. Scores agree to rounding. Token
# counts agree except for Gemini 2.5 Flash without reasoning: there the released file holds runaway
# generations at the ~65k-token output cap that Table 3 leaves out. Token counts of -1 (unknown)
# are dropped from the means.

# %%
frontier = pf.sources.frontier_from_tables()
if samples is not None:
    recomputed = pf.sources.frontier_from_samples(samples)
    check = recomputed.merge(frontier, on=["model", "reasoning", "task"], suffixes=("", "_table"))
    check = check.assign(performance_diff_pp=100 * (check["performance"] - check["performance_table"]).abs(),
                         tokens_diff=(check["tokens"] - check["tokens_table"]).abs())
    print(f"largest |per-sample mean - Table 1| = {check['performance_diff_pp'].max():.3f} pp over {len(check)} cells")
    display(check.sort_values("tokens_diff", ascending=False).head(6)[["model", "reasoning", "task", "tokens", "tokens_table"]])
display(pf.frontier.radar_data(frontier).round(1))

# %%
save(pf.frontier.radar_figure(frontier), "04_fig2_radar")

# %% [markdown]
# Addition, mean and the comparison tasks are nearly solved by every model; multiplication,
# division, standard deviation and exponentiation are solved only with thousands of reasoning tokens:

# %%
# Study 3's models trained in the paper's regime answered the same 500 questions (docs/study/study3.md,
# scoring (2)): drawn as stars where study_dir holds their cells (the last folder that does).
others = [Path(f) / study.OTHER_QUESTIONS_FILE for f in study_dirs if (Path(f) / study.OTHER_QUESTIONS_FILE).exists()]
ours = study.frontier_points(pd.read_csv(others[-1])) if others else None
save(pf.frontier.tokens_figure(frontier, ours), "04_fig3_tokens")

# %% [markdown]
# ## Per-difficulty curves and Figure 8 (the released per-sample data)
#
# Each test question carries a decimal difficulty (appendix A.3). The curves show how the score
# falls with it. Figure 8 asks whether 500 questions per task are enough: we redraw n of the 500
# answers with replacement, `bootstrap_draws` times per n, and show the standard deviation of the
# resulting mean score. It shrinks like 1/√n; at n = 500 it is a few percentage points at most.
# In both figures each task has two panels, maximal reasoning above minimal or no reasoning, so
# that no panel holds more than the eight models of one setting (hover names every line).

# %%
if samples is None:
    print("no released data: the per-difficulty curves and Figure 8 need the per-sample file (official_data).")
else:
    curves = pf.difficulty.difficulty_curves(samples)
    display(save(pf.difficulty.difficulty_figure(curves), "04_frontier_by_difficulty"))
    spread = pf.difficulty.stability(samples, draws=bootstrap_draws, seed=seed)
    display(spread.groupby("n")["std"].agg(["median", "max"]).mul(100).round(2)
            .rename(columns={"median": "median std (pp)", "max": "max std (pp)"}))
    display(save(pf.difficulty.stability_figure(spread), "04_fig8_stability"))

# %% [markdown]
# ## Figure 4: number encodings
#
# The paper trained the same 117M model with each encoding on all tasks at once (Table 4) and on
# each task alone (Table 7). "Subword" there is the triple-digit tokenizer. The third row is ours:
# the multi-task part `fig4_part` of docs/study/study1-2.md (the six tasks plus text at laptop scale; by
# default Study 2, as its protocol says: Study 2b, whose checkpoints are chosen by the numeric tasks
# alone, was to replace it only by reaching 0.9 on four of the six tasks, and republished it reaches
# three; bars are the mean over
# three seeds, error bars the 95 % bootstrap interval over seeds and test questions, perplexity ±
# std over seeds), or the runs of `results_csv` (error bars ± one standard deviation). The row's title gives
# the regime, and its perplexity panel our perplexity on held-out text of the run's own corpus (the
# pydoc topics shipped with the workbench, by default), over all tokens and over the text tokens only:
# not Fineweb, so its hatched bars sit on a scale of their own, not the paper's. Scores are log-sMAPE
# for arithmetic and exact-match accuracy for the list tasks, both in [0, 1], higher is better. The
# table below ranks the encodings per task, best first, with tokens per problem (Table 5).

# %%
if results is not None:
    display(experiments.summarize(results[~results.metric.isin(PERPLEXITIES)]).round(3))
save(pf.methods.methods_figure(results, source=source, intervals=intervals), "04_fig4_methods")

# %% [markdown]
# ## The laptop-scale study (docs/study/)
#
# Study 1: multiplication and division, each encoding trained alone, with operands of at most d
# significant digits. Where do BitTokens and single digits separate (non-overlapping 95 %
# intervals), and in which order do the five encodings come at each d?

# %%
if study_dir is None:
    print("study_dir not given: no study to draw.")
else:
    display(save(study.precision_figure(study_intervals), "04_study_precision"))
    separation = study.separation(study_intervals)
    display(separation.round(3))
    for task, first in study.first_difference(separation).items():
        print(f"{task}: " + (f"BitTokens and single digit first differ at d = {first[0]} ({encoders.label(first[1])} ahead)"
                             if first else "BitTokens and single digit never differ in d = 1 … 4"))
    display(study.ordering(study_intervals))

# %% [markdown]
# Study 2 (the six tasks plus text, three seeds) and Study 2b (the same runs' trajectories, with the
# checkpoint chosen by the numeric tasks alone): per encoding, the seed-mean score per task and how
# many tasks reach 0.9 (the regime's criterion), the ordering per task with 95 % intervals, and
# where the checkpoint rule moved a score beyond its interval.

# %%
if study_dir is not None:
    for part in parts:  # the multi-task parts the study holds (first cell)
        display(Markdown(f"**{study.PART_LABELS[part]}**"))
        display(study.task_scores(study_intervals, part).round(3))
        display(study.ordering(study_intervals, part, "log_smape"))
        display(study.ordering(study_intervals, part, "accuracy"))
    if study.NUMERIC_CHECKPOINT in parts:
        display(study.part_difference(study_intervals).round(3))

# %% [markdown]
# Exploratory, not pre-registered (docs/study/study1-2.md, "Exploratory"): BitTokens trained without A.3's
# binary pools, sampling the decimal pool by base-2 difficulty from the first step (the dashed line
# above). Against single digit, against BitTokens with binary pools, and in Study 2's ordering:

# %%
if study_dir is not None and study_intervals.study.str.endswith(study.DECIMAL_POOL).any():
    extended = study.exploratory_as_encoding(study_intervals)
    display(study.separation(extended, a=study.VARIANT).round(3))
    display(study.separation(extended, a=study.VARIANT, b="bittokens").round(3))
    display(study.ordering(extended, "multitask", "log_smape"))
    display(study.ordering(extended, "multitask", "accuracy"))
else:
    print("no exploratory runs in study_dir")

# %% [markdown]
# ## The encoding zoo: every registered encoding on the study's two protocols
#
# docs/study/zoo.md, "The encoding zoo": the paper's five (from Study 1 and Study 2b, the protocols the zoo
# registered) and every other
# registered encoding (`zoo_precision`, `zoo_multitask`) on the same protocols. Rank: 1 + the number
# of encodings whose 95 % interval lies entirely above the encoding's own (and whose mean is more
# than `study.DELTA` higher), so encodings whose intervals overlap share a rank; ranked among the
# encodings drawn, every encoding with runs in `study_dir` drawn (one with runs on one protocol only
# shows "no runs" on the other). Log-sMAPE and accuracy each have their own colour scale; the seed
# counts over the two protocols are read from the intervals. Then the width probe: BitTokens against
# single digit at d = 2 in a model twice as wide (exploratory).

# %%
if study_dir is not None and study_intervals.study.isin([study.ZOO_MULTITASK, study.ZOO_PRECISION]).any():
    board = leaderboard.leaderboard(study_intervals)
    display(leaderboard.table(board))
    display(leaderboard.table(board, "precision"))
    display(save(leaderboard.figure(board), "04_leaderboard"))
else:
    print("no zoo runs in study_dir")
if study_dir is not None and (study_intervals.study == study.WIDTH).any():
    display(study.width_comparison(study_intervals).round(3))

# %% [markdown]
# ## The zoo's length axis: longer numbers than trained on (docs/study/zoo2.md)
#
# Abacus, position coupling and reversed digits claim that a model trained on short numbers adds
# longer ones. Trained on addition with operands of at most four digits (single digit beside them as
# the control), each run answers 500 additions whose operands have exactly L digits, L = 4 ... 8:
# each encoding's mean over seeds with its 95 % interval, the training length marked. Drawn once
# the axis's cells are in `study_dir` (`cpu-study-length-cells.csv`).

# %%
length_files = [Path(d) / study.length.LENGTH_CELLS_FILE for d in study_dirs if (Path(d) / study.length.LENGTH_CELLS_FILE).exists()]
if length_files:  # later folders' cells over earlier ones', as for the study's tables
    length_cells = pd.concat([pd.read_csv(f) for f in length_files]).drop_duplicates(
        study.CELL + ["length", "metric"], keep="last")
    display(save(study.length.figure(length_cells), "04_zoo2_length"))
    display(study.length.against_control(length_cells).round(3))
else:
    print("no length-axis cells in study_dir")

# %% [markdown]
# ## Study 3: budget x precision (docs/study/study3.md)
#
# Multiplication and division trained alone at d = 4, 8 and 15 significant digits and in the paper's
# own regime, for 1M, 3M and 10M tokens: where along these two axes, if anywhere, do BitTokens (here
# without A.3's binary pools) and single digit separate? A difference needs apart 95 % intervals and
# a gap above the cross-CPU spread (`study.DELTA`). Drawn once its runs are in `study_dir`.

# %%
if study_dir is not None and study.budget_rows(study_intervals).shape[0]:
    display(save(study.budget_figure(study_intervals), "04_study_budget"))
    verdicts = study.budget_verdicts(study_intervals)
    display(verdicts.round(3))
    for (task, digits), first in study.smallest_budget(verdicts).items():
        print(f"{task}, d = {digits}: " + (f"first differ at {first[0] / 1e6:g}M tokens ({encoders.label(first[1])} ahead)"
                                           if first else "never differ at these budgets"))
else:
    print("no Study 3 runs in study_dir yet")

# %% [markdown]
# ## Study 4: paired seeds on portable numerics, with every run's curves (docs/study/study4.md)
#
# Study 3's deciding cells again, five paired seeds each: per cell the gap between the encodings on
# the same seeds and questions, its t interval over the seed gaps, and the verdict against one digit
# (1/15 of a log-sMAPE). Every published run's learning curve is kept in `results/runs/` and drawn
# from there: a thin line per seed, a thick line for their mean. Drawn once its cells are published.
# At d = 4, where Study 3 saw BitTokens stall, a second figure reads the kept runs for why: the test
# score per difficulty level, the curriculum's frontier, the number-head and text losses, the rate;
# with the registered intervention's runs (no curriculum, dashed) once they are published.

# %%
kept_levels = sorted({p.parent.name for p in study.kept.kept_runs(study.kept.KEPT) if p.parent.name.startswith("study4_")}) if study4 else []
for level in kept_levels:
    runs = study.kept.kept_runs(study.kept.KEPT, level)
    display(save(study.curves.curves_figure(study.curves.validation_curves(runs), study.curves.level_title(level) +
                                            ": validation score while training"), f"04_{level}_curves"))
    for task in sorted({r.task for r in study.plan([study.STUDY4]) if r.study == level and r.digits == 4}):
        if any(p.name.startswith(f"{level}-{task}-d4-") for p in runs):  # the stall Study 4 diagnoses
            beside = study.kept.kept_runs(study.kept.KEPT, level.replace(study.STUDY4, study.STUDY4_PLATEAU, 1))
            display(save(study.plateau.figure(runs + beside, task, 4, f"Study 4, {level.removeprefix('study4_')} tokens: "
                                              f"why BitTokens stall on {task} at d = 4"), f"04_{level}_plateau_{task}"))
if kept_levels:
    display(study.study4.verdicts(study.study4.answers([study.kept.KEPT])).round(3))
    found = study.study4.answers([study.kept.KEPT], parts=(study.STUDY4, study.STUDY4_PLATEAU))
    display(study.plateau.intervention(found).round(3))  # the plateau's registered test (docs/study/study4.md)
else:
    print("no Study 4 cell published yet" if study4 else "Study 4 skipped (study4=False)")

# %% [markdown]
# ## Figures 5 and 6: the operand exponents of the training data
#
# The paper's Figures 5 and 6 show the operand magnitudes of its generated data set: addition
# oversamples operands of similar exponent, where carries propagate (A.2). Ours, from
# `exponent_samples` questions of our generator's train split, one cell per pair of exponents.
# At the default the median occupied cell holds about a hundred questions or more (printed below),
# so the colours show the distribution rather than the noise of a few questions per cell; grey
# cells hold no question at all.

# %%
for task, number in (("addition", 5), ("multiplication", 6)):
    sources = {"workbench generator, train split": generate(task, exponent_samples, seed, "train")}
    cells = pf.datasets.exponent_pairs(sources["workbench generator, train split"]).value_counts()
    print(f"{task}: {len(cells)} occupied cells, questions per cell: median {cells.median():.0f}, least {cells.min()}")
    display(save(pf.datasets.exponent_figure(sources, f"Figure {number}: operand exponents of {task} questions"),
                 f"04_fig{number}_{task}_exponents"))

# %% [markdown]
# ## Figure 7: the benchmark against the test set
#
# The paper shows that its 500-question benchmark per task, the subset the frontier LLMs answered,
# follows the difficulty distribution of its full 10,000-question test set. The full set is not
# released; the benchmark is. We draw the released benchmark beside our generator's test split
# (`generator_samples` questions per task), which stands in for the full set, and measure how far
# apart they are (total variation distance per task, 0 to 1) beside how far 500 questions drawn at
# random from our own split land by chance. A distance well above chance means our generator or
# its difficulty measure differs from the authors' for that task; for exponentiation, mean and std
# the measures differ by design (docs/fidelity.md: we follow the paper's text, the authors' code
# damps the exponentiation difficulty and scores mean/std by the digits after the common prefix).
# Without the released data there is no benchmark to compare, and the figure is left out.

# %%
test_sets = pf.sources.official_test_sets(folder) if folder is not None else {}
if not test_sets:
    print("no released data: Figure 7 compares the released benchmark with the test set (official_data).")
else:
    ours = {t: generate(t, generator_samples, seed, "test") for t in test_sets}
    generator, released = f"workbench generator, test split ({generator_samples:,} per task)", "released benchmark (500 per task)"
    shares = pf.datasets.difficulty_distribution({generator: ours, released: test_sets})
    display(shares.groupby(["task", "source"])["difficulty_sd"].agg(["min", "max"]).unstack("source"))
    display(save(pf.datasets.difficulty_distribution_figure(shares), "04_fig7_difficulty"))
    # How far apart, beside how far 500 questions drawn from our own split land by chance alone.
    drawn = {t: f.sample(min(500, len(f)), random_state=seed) for t, f in ours.items()}
    noise = pf.datasets.difficulty_distribution({generator: ours, "drawn": drawn})
    distance = pd.DataFrame({"released vs ours": pf.datasets.distribution_distance(shares, released, generator),
                             "500 of ours vs ours (chance)": pf.datasets.distribution_distance(noise, "drawn", generator)})
    display(distance.round(3))
    apart = distance.index[distance["released vs ours"] > 2 * distance["500 of ours vs ours (chance)"]]
    print(f"more than twice as far apart as chance: {', '.join(apart) or 'none'}")

# %% [markdown]
# ## Tables 1-15

# %%
for number, table in pf.sources.paper_tables().items():
    display(Markdown(f"**Table {number}**"))
    display(table)

# %% [markdown]
# ## Rescoring raw answers: the paper's reading and a careful one
#
# Given a folder of raw model answers (`answers_dir`: the authors' per-answer files
# `{Task}_decimal_uniform_test_500_shuffle_{model}_re_{reasoning}.csv`, or the JSONL of
# `workbench.frontier.client` beside its benchmark JSONL), every answer is scored twice
# (`workbench.frontier.scoring`): with the paper's rules (the default: the authors' scorer, so the
# numbers are comparable with Tables 1 and 2) and with a careful reading of our own (`\boxed{}`,
# `1.5 \times 10^{3}`, thousands separators, nested JSON, "the answer is ..."; exact values; no
# credit for a number restated from the question). Tables 1 and 2 side by side, then where they differ.

# %%
if answers_dir is None:
    print("answers_dir not given: no folder of raw answers to rescore.")
else:
    scored = answer_folders.rescore(answer_folders.load_answer_folder(Path(answers_dir).expanduser()))
    for number in (1, 2):
        display(Markdown(f"**Table {number}, paper vs careful reading** ({len(scored):,} answers)"))
        display(answer_folders.side_by_side(scored, number).round(1))
    print(answer_folders.differences(scored))
