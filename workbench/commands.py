"""The installed console scripts whose modules load torch when imported (pyproject's
[project.scripts]): each answers --help and a mistyped flag from its settings' declarations first,
then imports the command; `python -m workbench.train` (workbench/train.py) runs `train` too. An
entry point naming `workbench.training.train:main` directly would import torch (seconds) before
reading a flag; tests/test_commands.py checks every console script for it."""

import sys


def train() -> None:
    """`workbench-train`: `python -m workbench.train`."""
    from .config import command_line
    from .model import numerics

    numerics.apply(command_line(sys.argv[1:])[1]["numerics"])  # before torch loads (numerics.py)
    from .training.train import main

    main()


def retrofit() -> None:
    """`workbench-retrofit`: `python -m workbench.retrofit`."""
    from .retrofit.config import command_line

    command_line(sys.argv[1:])
    from .retrofit.finetune import main

    main()
