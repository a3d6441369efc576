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
preset = "cpu-tiny"  # model size, a name of workbench.model.gpt_config.PRESETS
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
import time
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import torch
from IPython.display import display

from workbench.config import TrainConfig
from workbench.figures import plots
from workbench.figures import training as training_figures
from workbench.notebooks import ROOT
from workbench.results import results_from_summary
from workbench.training.train import train

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
def bundle(fig: go.Figure) -> dict:
    """The figure as a raw plotly mime bundle: a display handle can then replace it in place."""
    return {"application/vnd.plotly.v1+json": json.loads(fig.to_json()), "text/plain": fig.layout.title.text}


run_dir = Path(cfg.run.out)
live = display(bundle(training_figures.curves(run_dir, cfg)), raw=True, display_id=True)
run_dir = train(cfg, on_eval=lambda row: live.update(bundle(training_figures.curves(run_dir, cfg)), raw=True))
fig = training_figures.curves(run_dir, cfg, finished=True)
live.update(bundle(fig), raw=True)
plots.save(fig, "03_training_curves", figures_dir, tuple(figure_formats));  # the semicolon keeps its return value out of the output

# %% [markdown]
# ## Results on the held-out test split
#
# The best checkpoint (harmonic mean of the validation scores, eq. 15) answers `test_samples`
# questions per task. `results.csv` holds the same numbers in the results schema of
# `workbench.results` (encoding, task, metric, value, seed), the input of notebook 04's Figure 4.

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
by_level = training_figures.score_by_difficulty(run_dir, cfg)
fig = training_figures.difficulty_figure(by_level, cfg, run_dir)
plots.save(fig, "03_test_by_difficulty", figures_dir, tuple(figure_formats))
fig
