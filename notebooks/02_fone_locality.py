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
# # 02 — FoNE: local addition, non-local multiplication (section 4)
#
# Lemma 4.2 says the Fourier encoding turns addition into an element-wise product; Proposition 4.3
# says any operator producing one output frequency of F(x·y) must read ≥ ⌈log_P |X|⌉ components of
# each input. We check the first numerically and measure the second twice: exactly (conditional
# entropy over every pair of a grid) and with learned probes that see only a window of components.

# %% tags=["parameters"]
n_pairs = 1_000  # random pairs for Lemma 4.2
grid_digits = 3  # exhaustive grid: all integer pairs below 10**grid_digits (1..3)
precision = 10  # P: distinguishable states per encoding component
probe_steps = 300  # training steps per learned probe
seed = 0  # seed of the random pairs and of the probes
figures_dir: str | None = None  # None: runs/figures (`make figures` passes figures/)
figure_formats = ["html", "png"]  # any of html, png, svg
threads = 1  # torch CPU threads

# %%
import os

import pandas as pd
import torch
from IPython.display import display

from workbench.figures import locality as locality_figures
from workbench.figures import plots
from workbench.measures import locality
from workbench.notebooks import ROOT

os.chdir(ROOT)  # the repository root, as under the runner: relative paths mean the same in the lab

if not isinstance(n_pairs, int) or n_pairs < 1:
    raise ValueError(f"n_pairs must be a positive integer, got {n_pairs!r}")
if grid_digits not in (1, 2, 3):
    raise ValueError(f"grid_digits must be 1, 2 or 3 (10**(2*digits) pairs), got {grid_digits!r}")
if not isinstance(precision, int) or precision < 2:
    raise ValueError(f"precision must be an integer >= 2, got {precision!r}")
if not isinstance(probe_steps, int) or probe_steps < 1:
    raise ValueError(f"probe_steps must be a positive integer, got {probe_steps!r}")
torch.set_num_threads(threads)
pd.set_option("display.width", 200)


def save(fig, name):
    plots.save(fig, f"02_{name}", out_dir=figures_dir, formats=tuple(figure_formats))


# %% [markdown]
# ## Lemma 4.2: F(x + y) = F(x) ⊙ F(y)
# Largest deviation over random pairs, per period 10^φ, from exact phases and from the float32
# encoding; and the same test for the product, which has no such rule.

# %%
hom = locality.homomorphism_error(n=n_pairs, seed=seed)
display(hom.iloc[::4])
print(f"addition: max |F(x+y) - F(x)⊙F(y)| = {hom.add_exact_phases.max():.2e} (exact phases), "
      f"{hom.add_float32_encoding.max():.2e} (float32 encoding); "
      f"multiplication: max |F(xy) - F(x)⊙F(y)| = {hom.mul_exact_phases.max():.2f}")
TESTS = {"add_exact_phases": "x + y, exact phases", "add_float32_encoding": "x + y, float32 encoding",
         "mul_exact_phases": "x · y, exact phases"}
long = hom.melt(id_vars="period_exponent", var_name="test", value_name="max_error")
fig = plots.log_with_zeros(long.assign(test=long["test"].map(TESTS)), "period_exponent", "max_error", "test",
                           list(TESTS.values()), "period exponent φ (period 10^φ)", "largest deviation",
                           zero_label="exactly 0")
fig.update_layout(title=dict(text=f"Lemma 4.2: largest |F(x∘y) − F(x) ⊙ F(y)| over {n_pairs:,} random pairs, "
                                  "per period",
                             subtitle=dict(text="F = FoNE as points on the unit circle (deviations lie in [0, 2]); "
                                                "periods where every pair agrees exactly are on the strip below")),
                  width=1200, height=500, margin=dict(t=120))
save(fig, "lemma_4_2")
fig

# %% [markdown]
# ## Proposition 4.3 (a): how many components must an exact operator read?
# Every pair of integers below 10^digits; each component quantized to P states. For each output
# period, the conditional entropy H(output | input components in the best window of width w).
# H = 0 means a function of that window exists.

# %%
best = locality.window_entropy(grid_digits, precision)
need = locality.width_needed(best)
display(need)
fig = locality_figures.window_entropy_figure(best, grid_digits, precision)
save(fig, "window_entropy")
display(fig)
bound = int(best["pigeonhole_bound"].iloc[0])
for op in ("add", "mul"):
    g = need[need.op == op]
    print(f"{op}: window width needed per output period {dict(zip(g.output_period, g.width_needed))}; "
          f"largest entropy with one component {g.entropy_at_width_1.max():.2f} bits "
          f"(pigeonhole bound ceil(log_P |X|) = {bound})")

# %% [markdown]
# ## Proposition 4.3 (b): learned probes on windows of components
# An MLP sees the w input components nearest to one output component (of x and of y) and predicts
# that component of x + y or x · y (3-digit integer operands); FoNE, FoNE of log10 x, BitTokens bits.

# %%
probes = locality.probe_windows(steps=probe_steps, seed=seed)
display(probes)
fig = locality_figures.probes_figure(probes, probe_steps)
save(fig, "probes")
display(fig)

# %% [markdown]
# ## What came out
# Printed from the numbers above (nothing here is typed in by hand).

# %%
add_need = need[need.op == "add"].width_needed.max()
mul_need = need[need.op == "mul"].width_needed.max()
add_h1 = need[need.op == "add"].entropy_at_width_1.max()
mul_h1 = need[need.op == "mul"].entropy_at_width_1.max()
print(f"Lemma 4.2 holds to {hom.add_exact_phases.max():.1e} with exact phases; the product deviates by up to "
      f"{hom.mul_exact_phases.max():.2f} (on a unit circle: no Hadamard rule).")
print(f"Exact operator, P = {precision}: multiplication needs windows up to {mul_need} components and leaves "
      f"{mul_h1:.2f} bits unexplained with one; addition ALSO needs up to {add_need} components once components "
      f"are quantized (the carry), but leaves at most {add_h1:.2f} bits with one. The paper's locality of addition "
      "holds for continuous phases; with finite P it is local up to one carry bit.")
pivot = probes.pivot_table(index=["encoding", "op"], columns="width", values="accuracy")
for (enc, op), row in pivot.iterrows():
    row = row.dropna()
    base = probes[(probes.encoding == enc) & (probes.op == op)].majority_baseline.iloc[0]
    print(f"probe {enc:9s} {op}: accuracy at width {row.index[0]} = {row.iloc[0]:.2f}, "
          f"at full width {row.index[-1]} = {row.iloc[-1]:.2f} (baseline {base:.2f})")
