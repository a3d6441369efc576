"""BitTokens encoding speed: the paper's snippet (shift-and-mask per bit) vs our byte lookup table.

Both encode the same 1M float64 values and their reciprocals to 128 ±1 dims; outputs must be
identical (also on ±0, ±inf, NaN, subnormals and the extremes). Prints numbers/s (median of
repeats) and the ratio, measured in one run.

    python benchmarks/encode.py [--n 1000000] [--repeats 7] [--threads 1]
"""

import argparse
import math
import statistics
import time

import torch

from workbench import encoders

SHIFTS = torch.arange(63, -1, -1, dtype=torch.int64)


def paper_snippet(x: torch.Tensor) -> torch.Tensor:
    """The project page's reference: int64 view, one shift-and-mask per bit, cat, scale to ±1."""

    def bits(t):
        return (t.view(torch.int64).unsqueeze(-1) >> SHIFTS) & 1

    return torch.cat([bits(x), bits(x.reciprocal())], dim=-1).to(torch.float32) * 2 - 1


def median_rate(fn, x, repeats):
    fn(x)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - start)
    return len(x) / statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    x = (torch.rand(args.n, generator=gen, dtype=torch.float64) - 0.5) * 10 ** torch.randint(
        -14, 16, (args.n,), generator=gen
    ).double()
    ours = encoders.get("bittokens").encode
    specials = torch.tensor(
        [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -2.2250738585072014e-308, 1.7976931348623157e308],
        dtype=torch.float64,
    )
    for values in (x, specials):
        if not torch.equal(ours(values), paper_snippet(values)):
            raise SystemExit("outputs differ: the lookup table is wrong")
    snippet_rate = median_rate(paper_snippet, x, args.repeats)
    ours_rate = median_rate(ours, x, args.repeats)
    print(f"numbers: {args.n:,}  threads: {args.threads}  repeats: {args.repeats} (median)")
    print(f"paper snippet  {snippet_rate:14,.0f} numbers/s")
    print(f"lookup table   {ours_rate:14,.0f} numbers/s")
    print(f"ratio          {ours_rate / snippet_rate:14.1f}x")


if __name__ == "__main__":
    main()
