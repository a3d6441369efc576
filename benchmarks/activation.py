"""The MLP activation's cost in a training step: GPT-2's tanh GELU (the authors' architecture, our
default) beside exact GELU (nanoGPT's, the reference GPT's in benchmarks/train.py) and ReLU²
(modded-nanoGPT's), forward + backward on the MLP's hidden activation of a preset, interleaved
step by step, medians. On CPUs torch computes tanh with SLEEF's 1-ulp vector tanh, in the forward
and again in GELU's backward: that, not the matrix products, is where the tanh GELU costs.

    python benchmarks/activation.py [--preset cpu-small] [--batch 16] [--repeats 15] [--threads 1]
"""

import argparse
import statistics
import time

import torch

from workbench.model.gpt import ACTIVATIONS, preset


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu-small", help="model preset whose MLP shape is timed")
    parser.add_argument("--batch", type=int, default=16, help="rows per batch (benchmarks/train.py's default)")
    parser.add_argument("--repeats", type=int, default=15, help="timed forward + backward passes per activation")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = preset(args.preset)
    shape = (args.batch * cfg.block_size, cfg.mlp_ratio * cfg.d_model)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).requires_grad_()
    grad = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    times = {name: [] for name in ACTIVATIONS}
    for i in range(args.repeats + 1):
        for name, act in ACTIVATIONS.items():
            start = time.perf_counter()
            act(x).backward(grad)
            if i:  # the first pass warms up
                times[name].append(time.perf_counter() - start)
            x.grad = None
    base = statistics.median(times["gelu_tanh"])
    print(
        f"{args.preset}: activation [{shape[0]} x {shape[1]}], {args.threads} thread(s), forward + backward, "
        f"median of {args.repeats}; a training step runs it in each of the {cfg.n_layer} blocks"
    )
    for name, ts in times.items():
        median = statistics.median(ts)
        print(
            f"  {name:10s} {median * 1e3:7.1f} ms   x{cfg.n_layer} blocks {median * cfg.n_layer * 1e3:7.1f} ms/step"
            f"   tanh GELU / this {base / median:5.2f}x"
        )


if __name__ == "__main__":
    main()
