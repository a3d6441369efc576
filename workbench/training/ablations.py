"""The ablations of appendix D.3 (Tables 8-15), each one switch of the training recipe, runnable as

    python -m workbench.experiments ablations [--tables 8 9 ...] [--seeds 0] [--smoke] [--out runs/ablations]

Every table is a list of variants (the paper's column names) of one base configuration: the
multi-task protocol `experiments.PROTOCOLS["cpu-tier"]` by default. A variant is an encoding and
the TrainConfig fields it changes. Tables whose printed numbers carry deltas name their baseline
variant; the paper's baselines differ per table (docs/fidelity.md: Tables 9, 10 (BitToken), 13 and
14 against the zero_pad run, Table 12 against the default (sum) run, Table 11 against a solo-task
division run). Runs with the same configuration are trained once and shared between tables; a
finished run (its test_summary.csv exists) is not trained again, so an interrupted sweep resumes.

One CSV (results.csv): one row per table, variant, encoding, task, metric and seed, with `delta`
= value minus the mean of the table's baseline over seeds (NaN where the paper prints none).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

import pandas as pd

from .. import encoders, tasks
from ..config import TrainConfig, recorded
from .optim_config import OptimConfig


@dataclass(frozen=True)
class Variant:
    label: str  # the paper's column name
    encoding: str
    changes: dict = field(default_factory=dict)  # TrainConfig fields; "optim" holds OptimConfig fields
    baseline: bool = False


def _bittokens(label, baseline=False, **changes):
    options = {"combine": "zero_pad", **changes.pop("encoding_options", {})}
    return Variant(label, "bittokens", {"encoding_options": options, **changes}, baseline)


def _zero_pad(name) -> dict:
    """The authors' released configs join by zero_pad: the baseline of Tables 9, 10, 13 and 14 for
    every encoding that has a `combine` option (BitTokens)."""
    return {"encoding_options": {"combine": "zero_pad"}} if "combine" in encoders.catalog()[name] else {}


def _each_encoding(label, **changes):
    """The variant for every paper encoding, and each one's baseline (zero_pad where it applies)."""
    out = []
    for name in encoders.in_paper():
        base_changes = _zero_pad(name)
        out.append(Variant(f"{name} baseline", name, base_changes, baseline=True))
        out.append(Variant(f"{name} {label}", name, {**base_changes, **changes}))
    return out


# Table 15's mix: the difficult tasks (exponentiation, mean, std) added to the multi-task mix with
# text, as the paper's; ten tasks, so that r_max = 0.1 is a feasible cap
HARD = tuple(tasks.names("multi_step")) + tuple(tasks.names("text"))
TABLES = {
    8: [
        Variant(label, "bittokens", {"encoding_options": {"combine": combine}})
        for label, combine in (
            ("Sum", "sum"),
            ("Product", "product"),
            ("Concat", "concat"),
            ("Zero Pad", "zero_pad"),
            ("Weighted", "weighted"),
            ("Weighted + Sum", "weighted_sum"),
        )
    ],
    9: [
        _bittokens("Zero Pad", baseline=True),
        _bittokens("Base 10", encoding_options={"base": 10}),
        _bittokens("Layer norm", norm="layer"),
    ],
    10: _each_encoding("AdamW", optim={"optimizer": "adamw"}),
    11: [
        _bittokens("BitTokens", baseline=True, tasks=("division",)),
        _bittokens("BitTokens w/o reciprocal", tasks=("division",), encoding_options={"reciprocal": False}),
    ],
    12: [
        v
        for name in encoders.in_paper()
        for v in (
            Variant(f"{name} baseline", name, baseline=True),
            Variant(f"{name} no curriculum", name, {"curriculum": False}),
        )
    ],
    13: [
        _bittokens(label, encoding_options={"head": head})
        for label, head in (("None", "none"), ("Linear", "linear"), ("MLP", "mlp"))
    ],
    14: [
        _bittokens(label, balance_lambda=lam)
        for label, lam in (("harmonic", -1.0), ("geometric", 0.0), ("arithmetic", 1.0))
    ],
    15: [
        Variant(f"{name} r_max={cap}", name, {"max_task_ratio": cap, "extra_tasks": HARD, **_zero_pad(name)})
        for name in ("single_digit", "bittokens")
        for cap in (0.1, 0.2, 0.3, 1.0)
    ],
}


def config_of(variant: Variant, base: TrainConfig, seed: int) -> TrainConfig:
    """The TrainConfig of one run of `variant` on `base`. An encoding too wide to be padded into
    the base model (base 10's 420 dims in a 128-wide model) joins [NUM] through a learned
    projection instead ("weighted"), the only join that fits; `label_of` says so."""
    changes = dict(variant.changes)
    options = changes.get("encoding_options", {})
    if not fits(variant.encoding, options, base.model_config().d_model):
        changes["encoding_options"] = {**options, "combine": "weighted"}
    optim = OptimConfig(**{**asdict(base.optim), **changes.pop("optim", {})})
    extra = changes.pop("extra_tasks", ())
    if extra:
        changes["tasks"] = tuple(changes.get("tasks", base.tasks)) + tuple(t for t in extra if t not in base.tasks)
    return base.updated(encoding=variant.encoding, seed=seed, optim=optim, **changes)


def fits(encoding: str, options: dict, d_model: int) -> bool:
    """Whether the encoding's number head can be built at this width as configured."""
    try:
        encoders.get(encoding, **options).number_head(d_model)
    except ValueError:
        return False
    return True


def run_key(cfg: TrainConfig) -> str:
    """A name for a configuration: identical runs of different tables share it."""
    record = {k: v for k, v in recorded(cfg).items() if k not in ("out", "overwrite", "threads", "device")}
    record["encoding_options"] = {**encoders.options(cfg.encoding), **cfg.encoding_options}  # defaults spelled out
    digest = hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{cfg.encoding}-seed{cfg.seed}-{digest}"


def plan(table_numbers, base: TrainConfig, seeds) -> pd.DataFrame:
    """One row per (table, variant, seed): its run key and configuration."""
    rows = []
    for n in table_numbers:
        if n not in TABLES:
            raise ValueError(f"no ablation table {n!r}; the paper's are {sorted(TABLES)}")
        for variant in TABLES[n]:
            for seed in seeds:
                cfg = config_of(variant, base, seed)
                label = (
                    variant.label
                    if cfg.encoding_options == variant.changes.get("encoding_options", {})
                    else f"{variant.label} (weighted join)"
                )
                rows.append(
                    dict(
                        table=n,
                        variant=label,
                        encoding=variant.encoding,
                        seed=seed,
                        baseline=variant.baseline,
                        run=run_key(cfg),
                        config=cfg,
                    )
                )
    return pd.DataFrame(rows)


def with_deltas(results: pd.DataFrame) -> pd.DataFrame:
    """`results` plus `delta`: value minus the mean over seeds of the table's baseline of the same
    encoding, task and metric (NaN where the table has no baseline)."""
    base = (
        results[results.baseline]
        .groupby(["table", "encoding", "task", "metric"])["value"]
        .mean()
        .rename("baseline_value")
        .reset_index()
    )
    out = results.merge(base, on=["table", "encoding", "task", "metric"], how="left")
    return out.assign(delta=out["value"] - out.pop("baseline_value"))


def paper_layout(results: pd.DataFrame, table: int) -> pd.DataFrame:
    """One ablation table as the paper prints it: rows (task, metric), columns the variants, cells
    "value (delta)" with means over seeds."""
    part = results[results.table == table]
    means = part.groupby(["task", "metric", "variant"], sort=False)[["value", "delta"]].mean().reset_index()
    cell = means.apply(lambda r: f"{r.value:.3f}" + ("" if pd.isna(r.delta) else f" ({r.delta:+.3f})"), axis=1)
    order = list(dict.fromkeys(part["variant"]))
    return means.assign(cell=cell).pivot(index=["task", "metric"], columns="variant", values="cell")[order]
