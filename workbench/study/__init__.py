"""The laptop-scale study of docs/study/: where does the BitTokens advantage appear?

    python -m workbench.experiments study [--jobs 2] [--out runs/study]
    python -m workbench.experiments study --studies decimal_pool     # the exploratory part
    python -m workbench.experiments study --studies budget --budgets 10M   # Study 3's core, one level

One concept a file, read in this order: `parts` (every part's runs, registered before they ran),
`run` (training the plan into OUT and tabling its finished runs), `stats` (the hierarchical
bootstrap and the registered verdict rule), `questions` (Study 3's models on the authors' and an
independent generator's questions), `rows` (what a study row must be, checked where rows enter),
`published` (results/: read, merged, appended cell by cell), `figures` (what notebook 04 draws),
`report` (Study 3's tables in docs/study/study3.md, from results/); Study 4: `paired` (the paired verdict
against one digit), `study4` (its analysis), `kept` (every published run's curves and answers in
results/runs/), `curves` (their learning curves), `plateau` (why a cell stalls: levels, losses,
rates), `held` (finished runs held before publication, and restored on a new machine); the zoo's
length axis: `length` (models trained at d = 4 on longer additions).
Every name is also here: `study.plan(...)`, `study.DELTA`.
"""

from . import curves, kept, length, paired, plateau, study4  # noqa: F401
from .figures import (  # noqa: F401
    METRIC_LABELS,
    budget_figure,
    fig4_results,
    precision_figure,
)
from .parts import (  # noqa: F401
    BUDGET,
    BUDGET_BASE,
    BUDGET_D8,
    BUDGET_D8_DIGITS,
    BUDGET_DIGITS,
    BUDGET_MORE,
    BUDGET_PARTS,
    BUDGET_SEEDS,
    BUDGETS,
    COMMON,
    DECIMAL_POOL,
    DIGITS,
    ENCODINGS,
    MULTITASK,
    MULTITASK_PARTS,
    MULTITASK_SEEDS,
    NUMERIC_CHECKPOINT,
    PAPER_REGIME,
    PART_LABELS,
    PARTS,
    PRECISION,
    PRECISION_SEEDS,
    PRECISION_TASKS,
    PREREGISTERED,
    STRONGEST_MULTI_TOKEN,
    STUDY4,
    STUDY4_LR,
    STUDY4_PARTS,
    STUDY4_PLATEAU,
    STUDY4_SEEDS,
    VARIANT,
    WIDTH,
    ZOO2_LENGTH,
    ZOO_MULTITASK,
    ZOO_PRECISION,
    Run,
    budget_label,
    plan,
    select,
    zoo_encodings,
)
from .published import (  # noqa: F401
    CELL,
    INTERVAL_COLUMNS,
    PUBLISHED,
    TABLE_COLUMNS,
    publish,
    read_studies,
    read_study,
)
from .questions import (  # noqa: F401
    GENERATOR_FILE,
    OFFICIAL_FILE,
    OTHER_QUESTIONS_FILE,
    SCORINGS,
    frontier_points,
    generator_scores,
    official_scores,
    other_question_cells,
    scored_cells,
)
from .report import HEADER, MORE_HEADER, insert_table_rows, row_key, table_rows  # noqa: F401
from .run import (  # noqa: F401
    INTERVALS_FILE,
    RESULTS_FILE,
    bootstrap_intervals,
    budget_stability,
    collect,
    finished,
    run_study,
    stale,
    write_results,
)
from .stats import (  # noqa: F401
    DELTA,
    WITHIN,
    budget_of,
    budget_rows,
    budget_verdicts,
    exploratory_as_encoding,
    first_difference,
    hierarchical_bootstrap,
    ordering,
    part_difference,
    separation,
    smallest_budget,
    task_scores,
    verdict_stability,
    versus,
    width_comparison,
)
