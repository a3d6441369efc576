"""`python -m workbench.train`: the training command. The loop is workbench/training/train.py; this
module only answers the command, reading its flags before anything loads torch (commands.train), so
that --help and a mistyped flag answer in under a second (benchmarks/help_time.py).

    python -m workbench.train --encoding bittokens --tasks addition --preset cpu-small \
        --tokens 2e6 --decades 1 1 --max-digits 2 --out runs/add-bit
    torchrun --nproc_per_node 8 -m workbench.train --config paper --tasks addition,multiplication,...
"""


def main() -> None:
    from .commands import train

    train()


if __name__ == "__main__":
    main()
