"""How often does a "95 %" interval of a paired gap hold the true gap? Measured by simulation.

    python benchmarks/verdict_coverage.py [--sims 1000] [--draws 400] [--seed 0]

A cell is simulated as Study 4 measures it: per seed, a seed's true gap (the population's mean gap
plus a seed effect) and 500 per-question score differences around it. Each interval of
workbench/study/paired.py is computed from the simulated answers, and the share of simulations whose
interval holds the population's mean gap is its coverage. Scenarios: seed spread small or large
against the questions' noise, normal seed effects or a mixture in which one seed in five sticks in a
bad basin (its gap shifted by 0.2, as a stuck seed of Study 3 was). Prints one row per scenario and
seed count: the coverage of the paired t interval and of the paired hierarchical bootstrap.
"""

from __future__ import annotations

import argparse

import numpy as np
from tqdm import tqdm

from workbench.study.paired import paired_t

QUESTIONS, TRUE_GAP = 500, 0.05
SCENARIOS = {  # name: (seed sd, question sd, share of stuck seeds, stuck shift)
    "questions dominate (seed sd 0.01)": (0.01, 0.3, 0.0, 0.0),
    "seeds dominate (seed sd 0.05)": (0.05, 0.3, 0.0, 0.0),
    "one seed in five stuck (+0.2)": (0.02, 0.3, 0.2, 0.2),
}


def simulate(rng, seeds: int, seed_sd: float, question_sd: float, stuck: float, shift: float):
    """(per-seed question differences [seeds, QUESTIONS], the population's mean gap)."""
    effects = rng.normal(0, seed_sd, seeds) + shift * (rng.random(seeds) < stuck)
    diffs = TRUE_GAP + effects[:, None] + rng.normal(0, question_sd, (seeds, QUESTIONS))
    return diffs, TRUE_GAP + stuck * shift


def bootstrap(rng, diffs: np.ndarray, draws: int) -> tuple[float, float]:
    """paired.paired_bootstrap's percentile interval, vectorised over draws."""
    seeds = len(diffs)
    chosen = rng.integers(0, seeds, (draws, seeds))
    picks = rng.integers(0, QUESTIONS, (draws, seeds, QUESTIONS))
    means = diffs[chosen[:, :, None], picks].mean(axis=(1, 2))
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"{'scenario':<36} seeds  paired t  paired bootstrap  ({args.sims} simulations each)")
    for name, (seed_sd, question_sd, stuck, shift) in SCENARIOS.items():
        for seeds in (3, 5, 10):
            t_hits = boot_hits = 0
            for _ in tqdm(range(args.sims), desc=f"{name}, {seeds} seeds", leave=False):
                diffs, truth = simulate(rng, seeds, seed_sd, question_sd, stuck, shift)
                _, low, high = paired_t(diffs.mean(axis=1))
                t_hits += low <= truth <= high
                low, high = bootstrap(rng, diffs, args.draws)
                boot_hits += low <= truth <= high
            print(f"{name:<36} {seeds:>5}  {t_hits / args.sims:>8.3f}  {boot_hits / args.sims:>16.3f}")


if __name__ == "__main__":
    main()
