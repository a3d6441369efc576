"""A setting declares what it may take (`cli.setting`: choices, bounds) and one check refuses the
rest (`cli.check_settings`), for the training's, the retrofit's and the executors' settings alike.
Bug it replaces: config.py and retrofit/config.py each carried a ~50-line loop of range checks, and
config.py imported the curriculum, the balancing and the tokenizer only for their choice lists."""

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from workbench.cli import check_settings, choices_of, setting
from workbench.config import TrainConfig
from workbench.retrofit.config import RetrofitConfig

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Toy:
    steps: int = setting(10, "steps", low=1)
    rows: int | None = setting(None, "rows", low=8, high=64)
    lr: float = setting(0.1, "learning rate", above=0)
    share: float = setting(0.5, "a share", low=0, below=1)
    weight: float = setting(0.5, "a weight", low=-1, high=1)
    tokens: float = setting(1e3, "a budget", low=1)
    endgame: str = setting("fixed", "hand-over", choices=choices_of("training.curriculum", "ENDGAMES"))

    def __post_init__(self):
        check_settings(self)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"steps": 0}, "--steps must be an integer >= 1, got 0"),
        ({"steps": 2.0}, "--steps must be an integer >= 1, got 2.0"),
        ({"steps": True}, "--steps must be an integer >= 1, got True"),
        ({"rows": 65}, "--rows must be an integer in 8..64, got 65"),
        ({"lr": 0.0}, "--lr must be positive, got 0.0"),
        ({"share": 1.0}, "--share must be in [0, 1), got 1.0"),
        ({"weight": float("nan")}, "--weight must be in [-1, 1], got nan"),
        ({"tokens": float("inf")}, "--tokens must be a finite number >= 1, got inf"),
        ({"tokens": "many"}, "--tokens must be a finite number >= 1, got many"),
        ({"endgame": "sudden"}, "--endgame: unknown value 'sudden' (choices: fixed, mastery)"),
    ],
)
def test_a_value_outside_its_setting_is_refused_in_one_line_naming_the_flag(change, message):
    with pytest.raises(ValueError) as error:
        Toy(**change)
    assert str(error.value) == message


def test_the_bounds_hold_the_values_they_name():
    Toy(steps=1, rows=None, lr=1e-9, share=0.0, weight=-1, tokens=1)
    Toy(rows=8, share=0.999, weight=1)


def test_a_configuration_may_bound_a_shared_setting_tighter():
    """The retrofit's warm-up must end before its last step; a training's may take it all."""
    assert TrainConfig.of(adapt_warmup=1.0).balance.adapt_warmup == 1.0
    with pytest.raises(ValueError, match=r"^--adapt-warmup must be in \[0, 1\), got 1.0$"):
        RetrofitConfig.of(model="m", adapt_warmup=1.0)
    with pytest.raises(ValueError, match=r"^--adapt-warmup must be in \[0, 1\], got 1.5$"):
        TrainConfig.of(adapt_warmup=1.5)


def test_the_settings_import_no_module_of_the_recipe_for_its_choices():
    imported = set()
    for node in ast.walk(ast.parse((ROOT / "workbench" / "config.py").read_text())):
        if isinstance(node, ast.ImportFrom):
            imported |= {f"{node.module}.{a.name}" if node.module else a.name for a in node.names}
            imported.add(node.module or "")
    for module in ("training.curriculum", "training.curriculum_authors", "training.balancing", "tokenizer"):
        assert not any(name == module or name.startswith(module + ".") for name in imported), module
