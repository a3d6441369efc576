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
# # 03 — Training a small model with a number encoding
#
# A nanoGPT-style model learns the numeracy tasks of section 2 with any registered number encoding
# (`workbench.encoders.names()`: the paper's BitTokens, FoNE, xVal, single and triple digit, and the
# others of `workbench/encoders/`). The training loop (`workbench.train`)
# follows appendix C: Muon + Adam, the task balancer of eq. 16 and, for multiplication, division,
# exponentiation, mean and std, the difficulty curriculum of C.3.
#
# The defaults train a tiny model for about two minutes on one CPU core, on a narrowed operand
# regime (magnitudes 1 … 10⁴, at most 4 significant digits) so that learning is visible in that time.
# The paper's setting is `preset="paper"`, `tokens=1e10`, `decades=None`, `max_digits=None`.
#
# `options` sets any other field of `TrainConfig` (`python -m workbench.train --help` lists them),
# so every ablation of Tables 8–15 runs from here, e.g. `options={"encoding_options": {"combine":
# "zero_pad"}}` (Table 8), `{"encoding_options": {"base": 10}}` or `{"norm": "layer"}` (Table 9),
# `{"optim": {"optimizer": "adamw"}}` (10), `{"encoding_options": {"reciprocal": False}}` (11),
# `{"curriculum": False}` (12), `{"encoding_options": {"head": "mlp"}}` (13), `{"balance_lambda": 0}`
# (14), `{"max_task_ratio": 0.2}` (15). docs/fidelity.md lists every switch of the recipe.

# %% tags=["parameters"]
encoding = "bittokens"  # any registered encoding, workbench.encoders.names(): bittokens, fone, xval, single_digit, triple_digit, numerologic, ...
tasks = "addition,multiplication"  # comma-separated, from workbench.tasks.names()
preset = "cpu-tiny"  # cpu-tiny | cpu-small | paper
tokens = 1e6  # training budget in tokens
seed = 0  # seed of the data, the initialisation and the sampling
curriculum = True  # the difficulty curriculum of C.3 for multiplication, division, exp, mean, std
balancing = True  # the task balancing of C.4 (eq. 16); else equal shares
decades: list[int] | None = [0, 3]  # operand magnitudes 10**lo … 10**(hi+1) (None: the full range of the paper)
max_digits: int | None = 4  # significant digits per operand (None: up to 15-17 as in the paper)
eval_every = 50  # steps between validation rounds (live curves, balancer, curriculum)
val_samples = 64  # validation questions per task, answered every eval_every steps
test_samples = 200  # held-out test questions per task, answered at the end
out_dir: str | None = None  # run directory (None: runs/03_training/<encoding>_<tasks>_seed<seed>-<date>-<time>)
figures_dir: str | None = None  # None: runs/figures (`make figures` passes figures/)
figure_formats = ["html", "png"]  # any of html, png, svg
threads = 1  # torch CPU threads
options: dict = {}  # any other TrainConfig field, e.g. {"curriculum": False} or {"optim": {"optimizer": "adamw"}}

# %%
import json
import os
import textwrap
import time
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import torch
from IPython.display import display
from plotly.subplots import make_subplots

from workbench import encoders, plots
from workbench import tasks as task_registry
from workbench.balancing import weight_changes
from workbench.config import TrainConfig
from workbench.curriculum import difficulty_column
from workbench.notebooks import ROOT
from workbench.results import results_from_summary
from workbench.rundir import load_metrics, recorded_kernels
from workbench.tasks import generate, with_metric
from workbench.train import train

os.chdir(ROOT)  # the repository root, as under the runner: relative paths mean the same in the lab
torch.set_num_threads(threads)
task_list = tuple(t.strip() for t in tasks.split(",") if t.strip()) if isinstance(tasks, str) else tuple(tasks)
name = f"{encoding}_{'+'.join(task_list)}_seed{seed}"
default_out = Path("runs/03_training") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"  # a new directory per run
settings = dict(encoding=encoding, tasks=task_list, preset=preset, tokens=tokens, seed=seed,
                curriculum=curriculum, balancing=balancing,
                decades=tuple(decades) if decades is not None else None, max_digits=max_digits,
                eval_every=eval_every, checkpoint_every=eval_every, val_samples=val_samples,
                test_samples=test_samples, out=str(out_dir or default_out))
cfg = TrainConfig.of(**{**settings, **options})  # `options` win over the parameters above
cfg

# %% [markdown]
# ## Live learning curves
#
# Every `eval_every` steps the model answers the validation questions. The callback redraws four
# panels from the run directory (`train.load_metrics`: one row per step, one per evaluation): the
# training loss, the validation score per task (log-sMAPE for arithmetic, accuracy for the list
# tasks), the task sampling ratios of the balancer, and each curriculum's difficulty frontier.
# The total loss is the sum of each task's loss times its loss weight (C.4): the weights are set
# from the losses at the first evaluation(s), so the total loss changes scale there (dashed line)
# without the model changing; the cross-entropy and number-head losses are unweighted.
#
# BitTokens learn on the binary difficulty of their numbers, and for the last 10 % of the steps on
# the decimal difficulty of the test set, sampled uniformly (A.3): the shaded end phase, where the
# loss steps up because the batches suddenly hold questions of every difficulty.


# %%
def end_phase(total_steps: int, evals: pd.DataFrame) -> int | None:
    """First step of the decimal end phase (A.3), for a run with binary pools (an encoding trained
    on base-2 difficulty and a curriculum task; their evaluations log `endgame/<task>`)."""
    if not any(c.startswith("endgame/") for c in evals):
        return None
    return next(s for s in range(total_steps + 1) if difficulty_column(2, s, total_steps) == "difficulty_sd")


def curves(run_dir: Path, finished: bool = False) -> go.Figure:
    steps, evals = load_metrics(run_dir)
    fig = make_subplots(rows=2, cols=2, vertical_spacing=0.18, horizontal_spacing=0.1, subplot_titles=[
        "training loss", "validation score per task", "task sampling ratio (balancer, eq. 16)",
        "curriculum frontier (C.3)"])
    for column, label, dash in (("loss", "total loss (weighted)", "solid"), ("ce", "cross-entropy", "dot"),
                                ("number", "number-head loss", "dash")):
        if column in steps:
            fig.add_trace(go.Scatter(x=steps["step"], y=steps[column], name=label, legendgroup="loss",
                                     legendgrouptitle_text="loss", line=dict(color="#555555", dash=dash, width=1.5)),
                          1, 1)
    colors = dict(zip(task_list, plots.PALETTE))
    for panel, prefix in (((1, 2), "score/"), ((2, 1), "ratio/"), ((2, 2), "frontier/")):
        for i, task in enumerate(task_list):
            if prefix + task in evals:
                style = plots.series_style(i)  # curricula often reach the same level: each task its own dash and marker
                fig.add_trace(go.Scatter(x=evals["step"], y=evals[prefix + task], mode="lines+markers", name=task,
                                         legendgroup=task, legendgrouptitle_text="task" if task == task_list[0] else None,
                                         showlegend=prefix == "score/", line=dict(color=colors[task], **style["line"]),
                                         marker=style["marker"]), *panel)
    start = end_phase(int(steps["step"].max()), evals) if finished and not steps.empty else None
    if start is not None:
        for row, col in ((1, 1), (1, 2), (2, 1), (2, 2)):
            fig.add_vrect(x0=start, x1=int(steps["step"].max()), fillcolor="#bbbbbb", opacity=0.25, line_width=0,
                          row=row, col=col)
        fig.add_annotation(x=start, y=1, xref="x", yref="y domain", text="decimal end phase (A.3)", showarrow=False,
                           xanchor="right", yanchor="top")
    changes = weight_changes(evals) if not evals.empty else []
    for step in changes if len(changes) <= 3 else changes[:1]:
        fig.add_vline(x=step, line_dash="dash", line_color="#888888", line_width=1.5, row=1, col=1)
    if changes:
        fig.add_annotation(x=changes[0], y=0.02, xref="x", yref="y domain", xanchor="left", yanchor="bottom", showarrow=False,
                           text="loss weights set (C.4)" + (", then moved at every evaluation" if len(changes) > 3 else ""))
    curricular = [t for t in task_registry.names() if task_registry.get(t).curriculum]
    if not cfg.difficulty.curriculum or not set(curricular) & set(task_list):  # the frontier panel stays empty: say why
        why = "curriculum=False" if not cfg.difficulty.curriculum else f"none of {', '.join(task_list)} has one"
        panel = fig.get_subplot(2, 2)
        note = f"no curriculum in this run ({why}); the curricula of C.3 are those of {', '.join(curricular)}"
        fig.add_annotation(text="<br>".join(textwrap.wrap(note, 42)),
                           x=sum(panel.xaxis.domain) / 2, y=sum(panel.yaxis.domain) / 2, xref="paper", yref="paper",
                           xanchor="center", showarrow=False, font=dict(color="#7f7f7f"))
    elif set(task_list) - set(curricular):  # fewer lines than tasks: say which task has no curriculum
        panel = fig.get_subplot(2, 2)
        fig.add_annotation(text=f"no curriculum, no line: {', '.join(t for t in task_list if t not in curricular)}",
                           x=panel.xaxis.domain[1], y=panel.yaxis.domain[0] + 0.01, xref="paper", yref="paper",
                           xanchor="right", yanchor="bottom", showarrow=False, font=dict(color="#7f7f7f"))
    # a log axis: the first steps' drop (from ~10) would otherwise flatten the rest of the run
    fig.update_yaxes(type="log", exponentformat="power", row=1, col=1)
    for (row, col), label in {(1, 1): "loss per learned token (log scale)", (1, 2): "score (0 to 1)",
                              (2, 1): "share of the batch", (2, 2): "difficulty level"}.items():
        fig.update_yaxes(title_text=label, row=row, col=col)
    levels = evals[[c for c in evals if c.startswith("frontier/")]].stack() if not evals.empty else pd.Series()
    if len(levels):  # whole levels only
        fig.update_yaxes(tick0=0, dtick=max(1, int(levels.max() - levels.min()) // 6 + 1), row=2, col=2)
    fig.update_xaxes(title_text="training step")
    made_on = recorded_kernels(run_dir)  # another CPU capability rounds otherwise: other curves
    fig.update_layout(height=740, width=1100, title=f"Training {encoders.label(encoding)} on {', '.join(task_list)} ({preset}, "
                                                    f"{tokens:,.0f} tokens, seed {seed}"
                                                    f"{f', {made_on} kernels' if made_on else ''})", margin=dict(r=20))
    return fig


def bundle(fig: go.Figure) -> dict:
    """The figure as a raw plotly mime bundle: a display handle can then replace it in place."""
    return {"application/vnd.plotly.v1+json": json.loads(fig.to_json()), "text/plain": fig.layout.title.text}


run_dir = Path(cfg.run.out)
live = display(bundle(curves(run_dir)), raw=True, display_id=True)
run_dir = train(cfg, on_eval=lambda row: live.update(bundle(curves(run_dir)), raw=True))
fig = curves(run_dir, finished=True)
live.update(bundle(fig), raw=True)
plots.save(fig, "03_training_curves", figures_dir, tuple(figure_formats));  # the semicolon keeps its return value out of the output

# %% [markdown]
# ## Results on the held-out test split
#
# The best checkpoint (harmonic mean of the validation scores, eq. 15) answers `test_samples`
# questions per task. `results.csv` holds the same numbers in the results schema of
# `workbench.paper_figures` (encoding, task, metric, value, seed), the input of notebook 04's Figure 4.

# %%
summary = pd.read_csv(run_dir / "test_summary.csv")
results = results_from_summary(summary)
results.to_csv(run_dir / "results.csv", index=False)
display(summary)
results

# %% [markdown]
# ## Score per difficulty
#
# The test questions are regenerated (same seed, split and regime give the same frame) to attach
# their decimal difficulty (appendix A.3) to each answer. At the default size (`cpu-tiny`, 10^6
# tokens: minutes on a CPU) the model has only begun to learn and scores far below 1; the score
# axis fits the scores. The full-scale parameters (docs/notebooks.md) train a model that learns.

# %%
samples = pd.read_csv(run_dir / "test_samples.csv")
difficulty = pd.concat([generate(t, cfg.evaluation.test_samples, cfg.seed, "test", decades=cfg.data.decades,
                                 max_digits=cfg.data.max_digits)[["prompt", "difficulty_sd"]].assign(task=t)
                        for t in task_list if t != "text"])
by_level = (samples.merge(difficulty.drop_duplicates(["task", "prompt"]), on=["task", "prompt"], how="left")
            .groupby(["task", "difficulty_sd"])["score"].agg(score="mean", n="size").reset_index())
assert by_level["n"].sum() == len(samples), "every test answer should find its question"
fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.68, 0.32], vertical_spacing=0.06)
colors = dict(zip(task_list, plots.PALETTE))
for i, (task, part) in enumerate(by_level.groupby("task", sort=False)):
    metric = "log-sMAPE" if task in with_metric("log_smape") else "accuracy"
    style = plots.series_style(i)
    fig.add_trace(go.Scatter(x=part["difficulty_sd"], y=part["score"], mode="lines+markers", name=f"{task} ({metric})",
                             legendgroup=task, line=dict(color=colors[task], **style["line"]), marker=style["marker"],
                             customdata=part["n"],
                             hovertemplate="difficulty %{x}: %{y:.3f} over %{customdata} questions<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Bar(x=part["difficulty_sd"], y=part["n"], name=task, legendgroup=task, showlegend=False,
                         marker_color=colors[task], opacity=0.75), row=2, col=1)
# the axis fits the scores (a short run scores far below 1) and stops at 1, the best score
fig.update_yaxes(title_text="mean test score", range=plots.padded_range(by_level["score"], 0, 1.02), row=1, col=1)
fig.update_yaxes(title_text="questions", row=2, col=1)
fig.update_xaxes(title_text="decimal difficulty (from the non-zero digits of the operands, the paper's appendix A.3)",
                 row=2, col=1)
fig.update_layout(barmode="group", width=1000, height=620, legend=dict(title="task (score)"),
                  title=dict(text=f"Test score per decimal difficulty: {encoders.label(encoding)} on {', '.join(task_list)}",
                             subtitle=dict(text=f"{len(samples)} held-out questions of the best checkpoint (trained on "
                                                f"{recorded_kernels(run_dir)} kernels); bottom: how many questions "
                                                "each point averages")))
plots.save(fig, "03_test_by_difficulty", figures_dir, tuple(figure_formats))
fig
