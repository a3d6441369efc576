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
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 — Training a small model with a number encoding
#
# A nanoGPT-style model learns the numeracy tasks of section 2 with one of five number encodings
# (BitTokens, FoNE, xVal, single digit, triple digit). The training loop (`workbench.train`)
# follows appendix C: Muon + Adam, the task balancer of eq. 16 and, for multiplication, division,
# exponentiation, mean and std, the difficulty curriculum of C.3.
#
# The defaults train a tiny model for about two minutes on one CPU core, on a narrowed operand
# regime (magnitudes 1 … 10⁴, at most 4 significant digits) so that learning is visible in that time.
# The paper's setting is `preset="paper"`, `tokens=1e10`, `decades=None`, `max_digits=None`.

# %% tags=["parameters"]
encoding = "bittokens"  # bittokens | fone | xval | single_digit | triple_digit
tasks = "addition,multiplication"  # comma-separated, from workbench.tasks.names()
preset = "cpu-tiny"  # cpu-tiny | cpu-small | paper
tokens = 1e6  # training budget in tokens
seed = 0
curriculum = True
balancing = True
decades: list[int] | None = [0, 3]  # operand magnitudes 10**lo … 10**(hi+1) (None: the full range of the paper)
max_digits: int | None = 4  # significant digits per operand (None: up to 15-17 as in the paper)
eval_every = 50  # steps between validation rounds (live curves, balancer, curriculum)
val_samples = 64
test_samples = 200
out_dir: str | None = None  # default runs/03_training/<encoding>_<tasks>_seed<seed>
figures_dir: str | None = None  # default figures/
figure_formats = ["html", "png"]
threads = 1  # torch CPU threads

# %%
import json
from pathlib import Path

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import torch
from IPython.display import display
from plotly.subplots import make_subplots

from workbench import plots
from workbench.paper_figures import results_from_summary
from workbench.tasks import generate
from workbench.train import TrainConfig, train

torch.set_num_threads(threads)
task_list = tuple(t.strip() for t in tasks.split(",") if t.strip()) if isinstance(tasks, str) else tuple(tasks)
name = f"{encoding}_{'+'.join(task_list)}_seed{seed}"
cfg = TrainConfig(encoding=encoding, tasks=task_list, preset=preset, tokens=tokens, seed=seed,
                  curriculum=curriculum, balancing=balancing,
                  decades=tuple(decades) if decades is not None else None, max_digits=max_digits,
                  eval_every=eval_every, checkpoint_every=eval_every, val_samples=val_samples,
                  test_samples=test_samples, out=str(out_dir or Path("runs/03_training") / name))
cfg

# %% [markdown]
# ## Live learning curves
#
# Every `eval_every` steps the model answers the validation questions. The callback redraws four
# panels: the training loss, the validation score per task (log-sMAPE for arithmetic, accuracy for
# the list tasks), the task sampling ratios of the balancer, and each curriculum's difficulty frontier.


# %%
def curves(run_dir: Path, evals: list[dict]) -> go.Figure:
    """Loss per step (from metrics.jsonl) and the validation rows seen so far."""
    path = run_dir / "metrics.jsonl"
    steps = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    loss = pd.DataFrame([r for r in steps if "loss" in r])
    ev = pd.DataFrame(evals)
    fig = make_subplots(rows=2, cols=2, subplot_titles=["training loss", "validation score per task",
                                                        "task sampling ratio", "curriculum frontier (difficulty)"])
    if not loss.empty:
        fig.add_trace(go.Scatter(x=loss["step"], y=loss["loss"], name="loss", line=dict(color="gray")), 1, 1)
    colors = dict(zip(task_list, px.colors.qualitative.Plotly))
    for panel, prefix in (((1, 2), "score/"), ((2, 1), "ratio/"), ((2, 2), "frontier/")):
        for task in task_list:
            column = prefix + task
            if column in ev:
                fig.add_trace(go.Scatter(x=ev["step"], y=ev[column], mode="lines+markers", name=task,
                                         legendgroup=task, showlegend=prefix == "score/",
                                         line=dict(color=colors[task])), *panel)
    fig.update_xaxes(title_text="step")
    fig.update_layout(height=650, width=1100, title=f"{name}: training")
    return fig


def bundle(fig: go.Figure) -> dict:
    """The figure as a raw plotly mime bundle: a display handle can then replace it in place."""
    return {"application/vnd.plotly.v1+json": json.loads(fig.to_json()), "text/plain": fig.layout.title.text}


run_dir = Path(cfg.out)
evals = []
live = display(bundle(curves(run_dir, evals)), raw=True, display_id=True)


def on_eval(row):
    evals.append(row)
    live.update(bundle(curves(run_dir, evals)), raw=True)


run_dir = train(cfg, on_eval=on_eval)
plots.save(curves(run_dir, evals), "03_training_curves", figures_dir, tuple(figure_formats));

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
# their decimal difficulty (appendix A.3) to each answer.

# %%
samples = pd.read_csv(run_dir / "test_samples.csv")
difficulty = pd.concat([generate(t, cfg.test_samples, cfg.seed, "test", decades=cfg.decades,
                                 max_digits=cfg.max_digits)[["prompt", "difficulty_sd"]].assign(task=t)
                        for t in task_list if t != "text"])
by_level = (samples.merge(difficulty.drop_duplicates(["task", "prompt"]), on=["task", "prompt"], how="left")
            .groupby(["task", "difficulty_sd"])["score"].agg(score="mean", n="size").reset_index())
assert by_level["n"].sum() == len(samples), "every test answer should find its question"
fig = px.line(by_level, x="difficulty_sd", y="score", color="task", markers=True, hover_data=["n"],
              title=f"{name}: test score per decimal difficulty")
plots.save(fig, "03_test_by_difficulty", figures_dir, tuple(figure_formats))
fig
