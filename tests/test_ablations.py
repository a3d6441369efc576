"""The ablations of Tables 8-15: every variant is one switch of the base recipe, shared
configurations train once, finished runs are not retrained, deltas are against the table's
baseline."""

import json

import pandas as pd
import pytest

import workbench.training.train as train_module
from workbench import experiments
from workbench.config import recorded
from workbench.training import ablations
from workbench.training.train import TrainConfig

BASE = TrainConfig.of(
    tasks=experiments.SIX_TASKS,
    preset="cpu-small",
    batch_size=2,
    tokens=2 * 256 * 4,
    pool_size=200,
    val_samples=4,
    test_samples=6,
    eval_every=4,
    checkpoint_every=2,
    decades=(0, 1),
    max_digits=2,
    threads=1,
)


def test_every_table_is_one_switch_of_the_base():
    plan = ablations.plan(sorted(ablations.TABLES), BASE, seeds=(0,))
    assert sorted(plan.table.unique()) == list(range(8, 16))
    by = {(r.table, r.variant): r.config for r in plan.itertuples()}
    assert {
        by[(8, label)].encoding_options["combine"]
        for label in ("Sum", "Product", "Concat", "Zero Pad", "Weighted", "Weighted + Sum")
    } == {"sum", "product", "concat", "zero_pad", "weighted", "weighted_sum"}
    assert by[(9, "Layer norm")].model.norm == "layer" and by[(9, "Zero Pad")].model.norm == "rms"
    assert by[(10, "xval AdamW")].optim.optimizer == "adamw" and by[(10, "xval baseline")].optim.optimizer == "muon"
    assert by[(11, "BitTokens w/o reciprocal")].encoding_options["reciprocal"] is False
    assert by[(11, "BitTokens")].tasks == ("division",)
    assert not by[(12, "fone no curriculum")].difficulty.curriculum and by[(12, "fone baseline")].difficulty.curriculum
    assert [by[(14, k)].balance.balance_lambda for k in ("harmonic", "geometric", "arithmetic")] == [-1, 0, 1]
    hard = by[(15, "bittokens r_max=0.2")]
    assert hard.balance.max_task_ratio == 0.2 and {"exponentiation", "mean", "std", "text"} <= set(hard.tasks)
    assert len(by[(15, "bittokens r_max=0.1")].tasks) == 10
    # base 10's 420 dims cannot be padded into a 256-wide model: the learned projection joins instead
    base10 = plan[(plan.table == 9) & plan.variant.str.startswith("Base 10")].iloc[0]
    assert base10.variant == "Base 10 (weighted join)" and base10.config.encoding_options["combine"] == "weighted"
    # identical configurations share a run: Table 9's zero_pad baseline is Table 13's "Linear"
    assert (
        plan[(plan.table == 9) & (plan.variant == "Zero Pad")].run.item()
        == plan[(plan.table == 13) & (plan.variant == "Linear")].run.item()
    )
    with pytest.raises(ValueError, match="no ablation table"):
        ablations.plan([7], BASE, (0,))


def test_deltas_are_against_the_tables_baseline_mean_over_seeds():
    rows = [
        dict(
            table=9,
            variant=v,
            baseline=v == "Zero Pad",
            encoding="bittokens",
            task="division",
            metric="log_smape",
            value=x,
            seed=s,
        )
        for v, values in {"Zero Pad": (0.9, 0.7), "Base 10": (0.5, 0.3)}.items()
        for s, x in enumerate(values)
    ]
    rows.append(
        dict(
            table=8,
            variant="Sum",
            baseline=False,
            encoding="bittokens",
            task="division",
            metric="log_smape",
            value=0.6,
            seed=0,
        )
    )
    out = ablations.with_deltas(pd.DataFrame(rows)).set_index(["table", "variant", "seed"])["delta"]
    assert out[(9, "Base 10", 0)] == pytest.approx(-0.3) and out[(9, "Base 10", 1)] == pytest.approx(-0.5)
    assert out[(9, "Zero Pad", 0)] == pytest.approx(0.1) and pd.isna(out[(8, "Sum", 0)])
    layout = ablations.paper_layout(ablations.with_deltas(pd.DataFrame(rows)), 9)
    assert layout.loc[("division", "log_smape"), "Base 10"] == "0.400 (-0.400)"


def test_run_writes_one_csv_and_resumes(tmp_path, monkeypatch):
    trained = []

    def fake_train(cfg, resume=False):
        trained.append(cfg.run.out)
        from pathlib import Path

        out = Path(cfg.run.out)
        out.mkdir(parents=True)
        (out / "config.json").write_text(json.dumps(recorded(cfg)))
        score = 0.5 if cfg.encoding_options.get("reciprocal", True) else 0.2
        pd.DataFrame(
            {
                "task": ["division"],
                "score": [score],
                "exact": [0.0],
                "input_tokens": [7.0],
                "output_tokens": [2.0],
                "encoding": [cfg.encoding],
                "seed": [cfg.seed],
                "train_seconds": [1.0],
            }
        ).to_csv(out / "test_summary.csv", index=False)
        return out

    monkeypatch.setattr(train_module, "train", fake_train)
    results = experiments.run_ablations([11], seeds=(0,), out=tmp_path, base=BASE)
    saved = pd.read_csv(tmp_path / "results.csv")
    assert len(trained) == 2 and len(saved) == len(results) == 4  # 2 runs x (log-sMAPE, exact match)
    delta = saved[(saved.variant == "BitTokens w/o reciprocal") & (saved.metric == "log_smape")].delta.item()
    assert delta == pytest.approx(-0.3)
    experiments.run_ablations([11], seeds=(0,), out=tmp_path, base=BASE)
    assert len(trained) == 2  # finished runs are not trained again
