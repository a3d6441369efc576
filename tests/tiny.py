"""The tests' tiny training runs, in one place: cpu-tiny for a few steps of two rows of 128 tokens,
on one thread (two such runs share this machine's two cores), a pool of 100 questions and four
validation and test questions per task. Each test file names only what its runs need beyond that:

    TINY = tiny(8, tasks=("addition",), eval_every=4)       # 8 steps: tokens = 2 * 128 * 8
"""

ROW_TOKENS = 128  # cpu-tiny's context


def tiny(steps: int, batch_size: int = 2, **settings) -> dict:
    """TrainConfig.of's settings of a tiny run of `steps` steps of `batch_size` rows (the steps
    set `tokens`), the shared defaults overridden by `settings`."""
    return (
        dict(
            preset="cpu-tiny",
            batch_size=batch_size,
            tokens=batch_size * ROW_TOKENS * steps,
            pool_size=100,
            val_samples=4,
            test_samples=4,
            threads=1,
        )
        | settings
    )
