"""The study's parts as runs (docs/study/protocols.md): what each part trains, registered before its runs.

Study 1 ("precision"): multiplication and division, each encoding trained alone, operands of at
most d significant digits, d in DIGITS; Study 2 ("multitask"): the six comparison and single-step
tasks plus text, every encoding, three seeds. Every run uses the recipe's defaults
(docs/fidelity.md) and differs from the others only in what its part varies. "decimal_pool" is
exploratory (added after the pre-registered runs): BitTokens without A.3's binary pools on both
studies' grids. "multitask_numeric" (Study 2b, registered after Study 2's results) repeats Study 2
with the best checkpoint chosen by the numeric tasks' harmonic mean alone. The zoo runs Study 1's
and 2b's protocols for every other encoding; "width" is Study 1 at d = 2 in a 256-wide model.
Study 3 (the budget parts) trains multiplication and division at d in {4, 8, 15, the paper's
regime} for 1M, 3M and 10M tokens. Study 4 repeats its deciding cells with five paired seeds on
portable numerics; "study4_gpu" (exploratory, registered before any GPU run) carries them to 30M
tokens and beyond on a GPU (benchmarks/gpu_sprint.py), its rows named gpu_<budget>. "zoo2_length"
trains addition at d = 4 for the length axis of the zoo's second wave (tested by `study.length`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import encoders, tasks
from ..config import TrainConfig

ENCODINGS = tuple(encoders.in_paper())  # the paper's five
DIGITS = (1, 2, 3, 4)
PRECISION_TASKS = ("multiplication", "division")
PRECISION_SEEDS = (0, 1)
MULTITASK_SEEDS = (0, 1, 2)
PREREGISTERED = ("precision", "multitask")
DECIMAL_POOL = "decimal_pool"  # exploratory: BitTokens sample the decimal pool from the start
NUMERIC_CHECKPOINT = "multitask_numeric"  # Study 2b: Study 2 with the checkpoint chosen by the numeric tasks
ZOO_PRECISION, ZOO_MULTITASK = "zoo_precision", "zoo_multitask"  # the zoo: Study 1's and Study 2b's protocols
WIDTH = "width"  # exploratory: BitTokens and single digit in a 256-wide model (Study 1's protocol at d = 2)
# Study 3 (docs/study/protocols.md): budget x precision, in three registered parts run in this order
BUDGET, BUDGET_D8, BUDGET_MORE = "budget", "budget_d8", "budget_more"
BUDGET_PARTS = (BUDGET, BUDGET_D8, BUDGET_MORE)
# Study 4 (docs/study/study4.md): Study 3's deciding cells again, five paired seeds on portable numerics
STUDY4 = "study4"
STUDY4_LR = "study4_lr"
STUDY4_PARTS = (STUDY4, STUDY4_LR)
STUDY4_GPU = "study4_gpu"  # exploratory: Study 4's cells at GPU budgets (docs/study/study4.md)
STUDY4_PLATEAU = "study4_plateau"  # the registered intervention on the d = 4 stall (docs/study/study4.md)
ZOO2_LENGTH = "zoo2_length"  # the zoo's length axis (docs/study/zoo2.md): trained at d = 4, tested longer
PARTS = (
    PREREGISTERED
    + (DECIMAL_POOL, NUMERIC_CHECKPOINT, ZOO_PRECISION, ZOO_MULTITASK, WIDTH)
    + BUDGET_PARTS
    + STUDY4_PARTS
    + (STUDY4_GPU, STUDY4_PLATEAU, ZOO2_LENGTH)
)
MULTITASK_PARTS = ("multitask", NUMERIC_CHECKPOINT)  # the parts Figure 4's third row can show
PART_LABELS = {"multitask": "Study 2", NUMERIC_CHECKPOINT: "Study 2b, checkpoint chosen without text's score"}
VARIANT = "bittokens_decimal_pool"  # the exploratory runs drawn as a sixth encoding of their study
VARIANT_OF = "bittokens"  # the encoding VARIANT's runs train, without A.3's binary pools


def base_encoding(encoding: str) -> str:
    """The encoding a run of the results' `encoding` trains (VARIANT's is VARIANT_OF)."""
    return VARIANT_OF if encoding == VARIANT else encoding


# The shared small scale: cpu-tiny, batch 8 x 128, operands of magnitude 1 ... 100.
COMMON = dict(
    preset="cpu-tiny",
    batch_size=8,
    decades=(0, 1),
    pool_size=20_000,
    test_samples=500,
    eval_every=100,
    checkpoint_every=100,
    threads=1,
)
PRECISION = TrainConfig.of(tasks=("multiplication",), tokens=1e6, val_samples=32, **COMMON)
MULTITASK = TrainConfig.of(
    tasks=tuple(tasks.names("single_step") + tasks.names("comparison") + tasks.names("text")),
    tokens=4e6,
    max_digits=1,
    val_samples=64,
    **COMMON,
)


# Study 3: the two axes on which the paper's gap lives, the numbers' length and the training budget.
# d = 17 stands for the paper's own regime (magnitudes 1e-14 ... 1e15, at most 17 significant
# digits, --decades and --max-digits None); the other d at magnitudes 1 ... 100.
PAPER_REGIME = 17
BUDGETS = (1e6, 3e6, 1e7)
BUDGET_SEEDS = (0, 1, 2)
BUDGET_DIGITS, BUDGET_D8_DIGITS = (4, 15, PAPER_REGIME), (8,)
# the leaderboard's strongest multi-token encoding: the highest mean log-sMAPE over Study 1's eight
# (task, d) cells among the multi-token encodings other than single digit (results/, at registration)
STRONGEST_MULTI_TOKEN = "ntl"
# budget_more: the recipe's BitTokens (with A.3's binary pools) and the strongest multi-token encoding
MORE_ENCODINGS = ("bittokens", STRONGEST_MULTI_TOKEN)
# Study 1's recipe and model with the paper's pool of a million questions per task: at 8-9 tokens a
# question, a 10M-token BitTokens run draws 1.2M questions, which a 20,000-question pool would
# repeat 60 times (Study 3 measures learning with the budget, not memorising)
BUDGET_BASE = PRECISION.updated(pool_size=1_000_000)


# Study 4: the main grid (Study 3's core cells at 3M and 10M, decimal-pool BitTokens against single
# digit), the d = 15 multiplication cells where Study 3 put the recipe's BitTokens (binary pools)
# ahead, and the learning-rate check; every run on portable numerics, the same bits on any x86-64 CPU
STUDY4_SEEDS = (0, 1, 2, 3, 4)
STUDY4_DIGITS = (4, 15, PAPER_REGIME)
STUDY4_BUDGETS = (3e6, 1e7)
STUDY4_ENCODINGS = (VARIANT, "single_digit")
STUDY4_AHEAD_BUDGETS = (1e6, 3e6)  # Study 3's "BitTokens ahead" cells: multiplication, d = 15
# The learning-rate check: multiplication at d = 4 and 3M tokens, where BitTokens stalled; each rate
# moved alone from the recipe's (hidden 0.02, head 0.004), two seeds, chosen on the validation split
STUDY4_LR_SEEDS = (0, 1)
STUDY4_LR_RATES = (("hidden_lr", 0.01), ("hidden_lr", 0.04), ("head_lr", 0.002), ("head_lr", 0.008), ("head_lr", 0.016))


# The GPU sprint (docs/study/study4.md, "Exploratory: the GPU sprint"): Study 4's runs of the main grid's
# encodings at budgets a CPU cannot reach, trained on a GPU in float32 with TF32 off (as a CPU computes),
# its studies named gpu_<budget> so that its rows never mix with a CPU's. The levels are tried in
# GPU_LEVELS' order; which of them run is fixed by `gpu_levels` from the first lease's measured speed.
GPU_DIGITS, GPU_MORE_DIGITS = (15, PAPER_REGIME), (4,)
GPU_BUDGETS = (3e7, 1e8, 3e8)
# d = 15 and the paper's regime at 30M and 100M first, d = 4 where the speed allows, 300M last
GPU_LEVELS = (
    (3e7, GPU_DIGITS),
    (1e8, GPU_DIGITS),
    (3e7, GPU_MORE_DIGITS),
    (3e8, GPU_DIGITS),
    (1e8, GPU_MORE_DIGITS),
    (3e8, GPU_MORE_DIGITS),
)
# the numerics check, first in the plan: Study 4's 1M cell of multiplication at d = 15, seed 0, on a GPU;
# its CPU twins are study4_1M-multiplication-d15-{bittokens,single_digit}-seed0
GPU_CHECK_BUDGET, GPU_CHECK_ENCODINGS = 1e6, ("bittokens", "single_digit")
# the rule's cap: six leases of 420 s of plan time (the 15 device minutes of a session hold one 8-minute
# command after the machine's start)
GPU_LEASE_SECONDS, GPU_LEASES = 420, 6


@dataclass(frozen=True)
class Run:
    study: str
    encoding: str
    task: str  # the solo task, or "multitask"
    digits: int
    seed: int
    config: TrainConfig

    @property
    def name(self) -> str:
        return f"{self.study}-{self.task}-d{self.digits}-{self.encoding}-seed{self.seed}"


def zoo_encodings() -> tuple[str, ...]:
    """Every registered encoding that is not one of the paper's five (a plugin joins by registering)."""
    return tuple(n for n in encoders.names() if n not in ENCODINGS)


def _precision(study: str, encodings, base: TrainConfig = PRECISION, digits=DIGITS) -> list[Run]:
    return [
        Run(study, e, t, d, s, base.updated(encoding=e, tasks=(t,), max_digits=d, seed=s))
        for t in PRECISION_TASKS
        for d in digits
        for e in encodings
        for s in PRECISION_SEEDS
    ]


def _multitask(study: str, encodings, select_with_text: bool = True) -> list[Run]:
    return [
        Run(
            study,
            e,
            "multitask",
            MULTITASK.data.max_digits,
            s,
            MULTITASK.updated(encoding=e, seed=s, select_with_text=select_with_text),
        )
        for e in encodings
        for s in MULTITASK_SEEDS
    ]


def budget_label(tokens: float) -> str:
    return f"{tokens / 1e6:g}M"


def _budget_run(encoding: str, task: str, digits: int, seed: int, tokens: float) -> Run:
    """One Study 3 run: `encoding` as the results name it (VARIANT: BitTokens without A.3's binary
    pools), trained alone on `task` for `tokens`."""
    regime = dict(decades=None, max_digits=None) if digits == PAPER_REGIME else dict(max_digits=digits)
    cfg = BUDGET_BASE.updated(
        encoding=base_encoding(encoding),
        binary_pool=encoding != VARIANT,
        tasks=(task,),
        seed=seed,
        tokens=tokens,
        **regime,
    )
    return Run(f"budget_{budget_label(tokens)}", encoding, task, digits, seed, cfg)


def _budget_grid(encodings, digits, budgets=BUDGETS) -> list[Run]:
    """Budget first (every 1M run before any 3M run), so that a study cut short by time leaves whole budgets."""
    return [
        _budget_run(e, t, d, s, b)
        for b in budgets
        for t in PRECISION_TASKS
        for d in digits
        for e in encodings
        for s in BUDGET_SEEDS
    ]


def _study4_run(encoding: str, task: str, digits: int, seed: int, tokens: float, study: str = STUDY4, **rates) -> Run:
    """One Study 4 run: Study 3's run of the cell on portable numerics (and a learning rate moved)."""
    cfg = _budget_run(encoding, task, digits, seed, tokens).config
    cfg = cfg.updated(numerics="portable", optim=replace(cfg.optim, **rates))
    return Run(f"{study}_{budget_label(tokens)}", encoding, task, digits, seed, cfg)


def study4_plan() -> list[Run]:
    """Study 4's main grid and its d = 15 cells, in the registered order: the 3M level whole, then the
    cells where Study 3 put BitTokens ahead (1M and 3M), then the 10M level."""
    grid = [
        _study4_run(e, t, d, s, b)
        for b in STUDY4_BUDGETS
        for t in PRECISION_TASKS
        for d in STUDY4_DIGITS
        for e in STUDY4_ENCODINGS
        for s in STUDY4_SEEDS
    ]
    ahead = [
        _study4_run(e, "multiplication", 15, s, b)
        for b in STUDY4_AHEAD_BUDGETS
        for e in ("bittokens", "single_digit")
        for s in STUDY4_SEEDS
        if not (b in STUDY4_BUDGETS and e in STUDY4_ENCODINGS)  # single digit at 3M is the grid's
    ]
    at_3m = [r for r in grid if r.config.tokens == 3e6]
    return at_3m + ahead + [r for r in grid if r.config.tokens != 3e6]


def study4_lr_plan() -> list[Run]:
    """The learning-rate check (the recipe's own rates are the main grid's runs of the cell)."""
    return [
        _study4_run(e, "multiplication", 4, s, 3e6, f"{STUDY4_LR}_{name.removesuffix('_lr')}{rate:g}", **{name: rate})
        for name, rate in STUDY4_LR_RATES
        for e in STUDY4_ENCODINGS
        for s in STUDY4_LR_SEEDS
    ]


def study4_plateau_plan() -> list[Run]:
    """The intervention on the d = 4 stall (docs/study/study4.md, "The plateau"): the main grid's runs of
    multiplication at d = 4 and 3M tokens without the difficulty curriculum, every question drawn
    from the pool as the test draws them; BitTokens' five seeds first, then single digit's."""
    return [
        Run(
            r.study.replace(STUDY4, STUDY4_PLATEAU, 1),
            r.encoding,
            r.task,
            r.digits,
            r.seed,
            r.config.updated(curriculum=False),
        )
        for e in STUDY4_ENCODINGS
        for s in STUDY4_SEEDS
        for r in [_study4_run(e, "multiplication", 4, s, 3e6)]
    ]


def _gpu_run(encoding: str, task: str, digits: int, seed: int, tokens: float) -> Run:
    """One GPU sprint run: Study 4's run of the cell (portable numerics, which pin a CPU's kernels and
    leave a GPU's as they are) with TF32 off and Muon's iteration in float32, as a CPU runs it ("auto"
    would be bfloat16 on a GPU), named gpu_<budget>."""
    cfg = _study4_run(encoding, task, digits, seed, tokens).config
    cfg = cfg.updated(tf32=False, optim=replace(cfg.optim, newton_schulz="float32"))
    return Run(f"gpu_{budget_label(tokens)}", encoding, task, digits, seed, cfg)


def gpu_level(tokens: float, digits) -> list[Run]:
    """One level of the sprint: both tasks at `digits`, seeds paired (each seed's two encodings side
    by side, so that a sprint cut short leaves whole pairs)."""
    return [
        _gpu_run(e, t, d, s, tokens)
        for t in PRECISION_TASKS
        for d in digits
        for s in STUDY4_SEEDS
        for e in STUDY4_ENCODINGS
    ]


def gpu_check_runs() -> list[Run]:
    return [_gpu_run(e, "multiplication", 15, 0, GPU_CHECK_BUDGET) for e in GPU_CHECK_ENCODINGS]


def gpu_plan(levels=GPU_LEVELS) -> list[Run]:
    """The numerics check, then `levels` ((tokens, digits) pairs) in order."""
    return gpu_check_runs() + [r for tokens, digits in levels for r in gpu_level(tokens, digits)]


def gpu_levels(rate: float, seconds: float = GPU_LEASES * GPU_LEASE_SECONDS) -> list[tuple[float, tuple]]:
    """The registered rule: the levels of GPU_LEVELS that run at an aggregate `rate` (tokens a second
    over a lease's whole plan time, set-up included, as the first lease measured it): the longest
    run of them, in order, that trains within `seconds` at that rate, and the first (30M at d = 15
    and the paper's regime) in any case. A faster device never runs fewer levels."""
    taken, tokens = [], 0.0
    for k, (budget, digits) in enumerate(GPU_LEVELS):
        tokens += budget * len(PRECISION_TASKS) * len(digits) * len(STUDY4_SEEDS) * len(STUDY4_ENCODINGS)
        if k and tokens > rate * seconds:
            break
        taken.append((budget, digits))
    return taken


# The length axis (docs/study/zoo2.md, "Length-generalisation axis"): the encodings whose claim is
# about numbers longer than those trained on, and single digit as the control, trained on addition
# alone at operands of magnitude 1 ... 10^4 with at most four significant digits; `study.length`
# then tests them on integers of exactly L digits, L = 4 ... 8
LENGTH_ENCODINGS = ("abacus", "position_coupling", "reversed_digits", "single_digit")
LENGTH_DIGITS = 4


def length_plan() -> list[Run]:
    base = PRECISION.updated(tasks=("addition",), decades=(0, LENGTH_DIGITS - 1), max_digits=LENGTH_DIGITS)
    return [
        Run(ZOO2_LENGTH, e, "addition", LENGTH_DIGITS, s, base.updated(encoding=e, seed=s))
        for e in LENGTH_ENCODINGS
        for s in PRECISION_SEEDS
    ]


def plan(which=PREREGISTERED) -> list[Run]:
    runs = []
    if "precision" in which:
        runs += _precision("precision", ENCODINGS)
    if "multitask" in which:
        runs += _multitask("multitask", ENCODINGS)
    if DECIMAL_POOL in which:
        solo = PRECISION.updated(encoding=VARIANT_OF, binary_pool=False)
        runs += [
            Run(f"precision_{DECIMAL_POOL}", VARIANT_OF, t, d, s, solo.updated(tasks=(t,), max_digits=d, seed=s))
            for t in PRECISION_TASKS
            for d in DIGITS
            for s in PRECISION_SEEDS
        ]
        runs += [
            Run(
                f"multitask_{DECIMAL_POOL}",
                VARIANT_OF,
                "multitask",
                MULTITASK.data.max_digits,
                s,
                MULTITASK.updated(encoding=VARIANT_OF, binary_pool=False, seed=s),
            )
            for s in MULTITASK_SEEDS
        ]
    if NUMERIC_CHECKPOINT in which:
        runs += [
            replace(r, study=NUMERIC_CHECKPOINT, config=r.config.updated(select_with_text=False))
            for r in plan(["multitask"])
        ]
    if ZOO_PRECISION in which:
        runs += _precision(ZOO_PRECISION, zoo_encodings())
    if ZOO_MULTITASK in which:
        runs += _multitask(ZOO_MULTITASK, zoo_encodings(), select_with_text=False)
    if WIDTH in which:
        runs += _precision(WIDTH, ("bittokens", "single_digit"), PRECISION.updated(preset="cpu-tiny-wide"), digits=(2,))
    if BUDGET in which:  # the core: BitTokens without binary pools and single digit
        runs += _budget_grid((VARIANT, "single_digit"), BUDGET_DIGITS)
    if BUDGET_D8 in which:
        runs += _budget_grid((VARIANT, "single_digit"), BUDGET_D8_DIGITS)
    if BUDGET_MORE in which:  # the recipe's BitTokens and the strongest multi-token encoding, 10M first
        runs += _budget_grid(MORE_ENCODINGS, BUDGET_DIGITS + BUDGET_D8_DIGITS, budgets=(1e7,))
        runs += _budget_grid(MORE_ENCODINGS, BUDGET_DIGITS + BUDGET_D8_DIGITS, budgets=(1e6, 3e6))
    if STUDY4 in which:
        runs += study4_plan()
    if STUDY4_LR in which:  # the registered order puts the learning-rate check before the 10M level
        ten = next((k for k, r in enumerate(runs) if r.study == f"{STUDY4}_{budget_label(1e7)}"), len(runs))
        runs[ten:ten] = study4_lr_plan()
    if STUDY4_GPU in which:  # every level the rule could admit; the sprint trains those it does
        runs += gpu_plan()
    if STUDY4_PLATEAU in which:
        runs += study4_plateau_plan()
    if ZOO2_LENGTH in which:
        runs += length_plan()
    return runs


def select(runs: list[Run], encodings=None, seeds=None, tasks_=None, digits=None, budgets=None) -> list[Run]:
    """The runs whose encoding, seed, task ("multitask" for a multi-task run), digits and token
    budget are among those given (None: any)."""
    chosen = [
        r
        for r in runs
        if (encodings is None or r.encoding in encodings)
        and (seeds is None or r.seed in seeds)
        and (tasks_ is None or r.task in tasks_)
        and (digits is None or r.digits in digits)
        and (budgets is None or r.config.tokens in budgets)
    ]
    if runs and not chosen:
        raise ValueError(
            "no run of the chosen parts matches --encodings/--seeds/--tasks/--digits/--budgets "
            f"{[encodings, seeds, tasks_, digits, budgets]}"
        )
    return chosen
