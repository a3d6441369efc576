"""The paper's figures 2-8, one module per figure family: what they are rebuilt from (sources.py:
the paper's tables, the authors' released files), the frontier models per task and per token
(frontier.py: Figures 2 and 3), per difficulty level and over the samples drawn (difficulty.py:
Figure 8), the encodings compared (methods.py: Figure 4) and the data set (datasets.py: Figures
5-7), in the look they share (style.py). Notebook 04 narrates them as `paper.frontier.radar_figure`
and so on."""

from . import datasets, difficulty, frontier, methods, sources, style  # noqa: F401 (the figure families)
