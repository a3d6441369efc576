"""The retrofit's settings and command line: `RetrofitConfig` (the training's groups of config.py
with the retrofit's own defaults, and what is joined to the model) and its flags. Apart from
finetune.py, which runs it, so that `python -m workbench.retrofit --help` and a mistyped flag are
answered without importing torch or transformers.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from .. import encoders, tasks
from ..cli import Parser, add_encoding_option, setting
from ..config import GROUPS, BalanceArgs, DataArgs, DifficultyArgs, EvalArgs, Grouped, RunArgs, add_flags
from .hub import DTYPES, KNOWN

BASELINE = "none"  # the encoding name of the digit-token baseline: the model's own tokenizer
# How <|num|> is joined to the model (issue 68; joining.py, model.py and tokens.py say why). The
# first choice of each is the default; the second is what every run before issue 68 did.
NUM_INITS = ("digits", "mean")  # where <|num|>'s rows start
DIGIT_MASSES = ("merge", "drop")  # what the probability of the model's own digit tokens becomes
FRAMES = ("equals", "markers")  # where a question ends: " = " in the model's tokens, or <|eoq|>
# issue 68's choices, and what a folder saved before them (without the keys) was made with
ADOPTION = {"num_init": NUM_INITS[0], "digit_mass": DIGIT_MASSES[0], "frame": FRAMES[0]}
BEFORE_68 = {"num_init": NUM_INITS[1], "digit_mass": DIGIT_MASSES[1], "frame": FRAMES[1]}
LOSS_LOGITS = ("targets", "full")  # where the training loss computes logits (issue 65: targets)
SKIPPED = {"checkpoint_every", "compile", "prefetch", "same_kernels"}  # run settings a fine-tuning does not use


def encoding_choices() -> list[str]:
    """The encodings a model can be retrofitted with (one <|num|> token and a head), and the baseline."""
    return [BASELINE] + encoders.single_token()


@dataclass
class RetrofitConfig(Grouped):
    """A fine-tuning run: the model and what is joined to it here, the workbench's recipe in the
    training's groups (config.py; the same flags, the retrofit's own defaults)."""

    model: str = setting(
        "-",
        f"local folder of a Hugging Face causal LM (or OUT/model of an earlier run), or a "
        f"packaged model: {', '.join(KNOWN)}",
    )
    encoding: str = setting(
        "bittokens",
        f"number encoding joined to the model; {BASELINE}: the model's own digit tokens (the baseline)",
        choices=encoding_choices,
    )
    encoding_options: dict = setting({}, "options of the encoding")
    num_init: str = setting(
        NUM_INITS[0],
        "where <|num|>'s rows (input embedding, lm head) start: digits: the mean of the rows of the "
        "model's tokens that begin a number (its digits); mean: the mean of all rows (before issue 68)",
        choices=lambda: list(NUM_INITS),
    )
    digit_mass: str = setting(
        DIGIT_MASSES[0],
        "the probability of the model's own tokens that begin a number, under an encoding: merge: "
        "it is <|num|>'s, in the loss and in generation; drop: masked in generation and lost "
        "(before issue 68)",
        choices=lambda: list(DIGIT_MASSES),
    )
    frame: str = setting(
        FRAMES[0],
        "where a question ends: equals: ' = ' in the model's own tokens, where pretraining puts "
        "the first digit of a result; markers: the workbench's <|eoq|> token (before issue 68)",
        choices=lambda: list(FRAMES),
    )
    loss_logits: str = setting(
        LOSS_LOGITS[0],
        "where the training loss computes the LM head's logits: targets: at the learned targets only, "
        "in chunks recomputed in the backward pass (the same losses, gradients equal to rounding, "
        "about half the memory); full: at every position over the whole vocabulary (before issue 65)",
        choices=lambda: list(LOSS_LOGITS),
    )
    tasks: tuple[str, ...] = setting(
        ("multiplication",), "tasks to fine-tune on, e.g. multiplication,addition", choices=tasks.names
    )
    tokens: float = setting(2e5, "fine-tuning budget: tokens of the samples drawn (padding not counted)", low=1)
    text_share: float = setting(
        0.25,
        "share of every step's tokens that is text of --text-source's training "
        "documents, to keep the model's language (0: numbers only)",
        low=0,
        below=1,
    )
    text_pool_size: int = setting(1000, "training text chunks the text share draws from", low=1)
    text_samples: int = setting(
        50, "held-out text chunks whose perplexity is measured before and after (0: none)", low=0
    )
    dtype: str = setting(
        "float32",
        "dtype of the model's body while training and when saved (auto: as stored); "
        "a low-precision body trains on float32 master weights; the number head is float32",
        choices=lambda: list(DTYPES),
    )
    lora: bool = setting(
        False,
        "train LoRA adapters on every linear layer, the added tokens' rows and the number "
        "head; the rest of the model stays frozen",
    )
    lora_rank: int = setting(16, "rank of the LoRA adapters", low=1)
    lora_alpha: float = setting(32.0, "LoRA scale alpha (the update is alpha / rank x B A)", above=0)
    lr: float = setting(1e-4, "AdamW learning rate of the model's weights (of the adapters with --lora)", above=0)
    head_lr: float = setting(1e-3, "AdamW learning rate of the number head (new, so it learns faster)", above=0)
    warmup_frac: float = setting(
        0.05, "share of the steps of linear lr warm-up before the cosine decay", low=0, below=1
    )
    batch_tokens: int = setting(
        4096, "tokens per step: samples are drawn by the task ratios until they hold this many", low=8
    )
    context: int = setting(512, "longest sample in tokens (longer text is cut; at most the model's positions)", low=8)
    seed: int = setting(0, "seed of the data, the new weights and the sampling", low=0)
    data: DataArgs = field(default_factory=lambda: DataArgs(decades=(0, 3), max_digits=4))
    difficulty: DifficultyArgs = field(default_factory=DifficultyArgs)
    balance: BalanceArgs = field(default_factory=BalanceArgs)
    evaluation: EvalArgs = field(default_factory=lambda: EvalArgs(val_samples=64, eval_every=50))
    run: RunArgs = field(default_factory=lambda: RunArgs(out="runs/retrofit", threads=0))

    GROUPS = {name: kind for name, kind in GROUPS.items() if name != "model"}  # the model is Hugging Face's
    # a fine-tuning's warm-up and endgame end before its last step
    BOUNDS = {"adapt_warmup": {"high": None, "below": 1}, "endgame_share": {"low": 0, "below": 1}}

    def __post_init__(self):
        self.tasks = tuple(self.tasks)
        for name, kind in self.GROUPS.items():
            if isinstance(getattr(self, name), dict):
                setattr(self, name, kind(**getattr(self, name)))
        unknown = [t for t in self.tasks if t not in tasks.names()]
        if not self.tasks or unknown or len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"--tasks must be distinct names from {tasks.names()}, got {list(self.tasks)}")
        if self.encoding not in encoding_choices():
            raise ValueError(
                f"--encoding {self.encoding!r} cannot be joined to a model: choose one of "
                f"{encoding_choices()} (digit encodings have no number head; {BASELINE} is the "
                "model's own digit tokens)"
            )
        self.check()
        if self.text_share and "text" in self.tasks:
            raise ValueError(
                "--tasks holds text and --text-share is not 0: the balancer sets the text's share "
                "when it is a task; pass --text-share 0, or leave text out of --tasks"
            )
        self.regime = self.data.regime()

    def lr_shape(self) -> tuple[float, float]:
        """(the lr warm-up's share of the steps, the lr's floor as a share of its peak: 0, for AdamW's
        cosine ends at 0): what the curricula read of the schedule (adapt.build_sampler)."""
        return self.warmup_frac, 0.0


def parser() -> argparse.ArgumentParser:
    """The fine-tuning command's flags (python -m workbench.retrofit --help)."""
    catalog = encoders.catalog()
    options = "; ".join(f"{n}: {catalog[n] or 'none'}" for n in encoding_choices()[1:])
    parser = Parser(
        prog="python -m workbench.retrofit",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Fine-tune a local Hugging Face causal LM with a number encoding (or, --encoding none, with its "
        "own digit tokens) on the workbench's tasks; the model is saved in OUT/model.",
        epilog=f"Encoding options (--encoding-option KEY=VALUE) and their defaults: {options}",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (phases, tokens, steps) and its estimated time from recorded rates; load, "
        "train and write nothing",
    )
    add_encoding_option(parser)
    add_flags(parser, RetrofitConfig(model="-"), skip=SKIPPED)
    return parser


def configuration(parser: argparse.ArgumentParser, args: dict) -> RetrofitConfig:
    """The run's configuration from parsed flags, --out resolved as the run will write it; a bad
    value exits with one line."""
    from ..cli import encoding_options
    from ..config import from_flags
    from ..runs.outputs import output_path

    try:
        cfg = from_flags(
            args, RetrofitConfig(model="-"), skip=SKIPPED, encoding_options=encoding_options(args["encoding_option"])
        )
        return cfg.updated(out=str(output_path(cfg.run.out, "--out")))  # never results/ or the checkout
    except ValueError as err:
        parser.fail(err)


def command_line(argv=None) -> tuple[argparse.ArgumentParser, dict]:
    """(the parser, the parsed flags); --help, a bad flag and a missing --model exit here."""
    flags = parser()
    args = vars(flags.parse_args(argv))
    if not args["model"].strip() or args["model"] == "-":
        flags.error(f"--model is required: the local folder of a Hugging Face causal LM, or {', '.join(KNOWN)}")
    return flags, args
