"""QK-norm + RoPE of one attention layer, forward + backward, on the PyTorch path (fused.py's
rms_norm, then rotate) beside the C kernels (workbench/model/cpu_kernels.c), interleaved, medians; the
outputs and gradients checked bit for bit first. One thread: the kernels run only there.

    python benchmarks/cpu_kernels.py [--preset cpu-small] [--batch 16] [--repeats 50]
"""

import argparse
import statistics
import time

import torch
from einops import rearrange

from workbench.model import cpu_kernels, fused
from workbench.model.gpt import preset


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu-small", help="model preset whose layer shape is timed")
    parser.add_argument("--batch", type=int, default=16, help="rows of block_size tokens")
    parser.add_argument("--repeats", type=int, default=50, help="timed forward + backward passes per path")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if cpu_kernels.library() is None:
        raise SystemExit("the C kernels are off here (see the warning above): nothing to compare")
    cfg = preset(args.preset)
    B, T, H, D = args.batch, cfg.block_size, cfg.n_head, cfg.d_model // cfg.n_head
    g = torch.Generator().manual_seed(0)
    qkv = torch.randn(B, T, 3 * cfg.d_model, generator=g)
    angles = torch.rand(B, 1, T, D // 2, generator=g) * 100
    cos, sin = angles.cos(), angles.sin()
    grad = torch.randn(B, H, T, D, generator=g)
    paths = {
        "PyTorch": lambda x: fused.rotate(fused.rms_norm(x), cos, sin),
        "C kernels": lambda x: fused._NormRotate.apply(x, cos, sin),
    }

    def forward_backward(path):
        x = rearrange(qkv, "b t (qkv h d) -> b h qkv t d", qkv=3, h=H).unbind(2)[0].detach().requires_grad_()
        y = paths[path](x)
        y.backward(grad)
        return y.detach(), x.grad

    first = [forward_backward(path) for path in paths]
    same = all(torch.equal(a, b) for a, b in zip(*first))
    times = {path: [] for path in paths}
    for _ in range(args.repeats):
        for path in paths:
            start = time.perf_counter()
            forward_backward(path)
            times[path].append(time.perf_counter() - start)
    median = {path: statistics.median(t) * 1e3 for path, t in times.items()}
    print(
        f"{args.preset}: queries [{B}, {H}, {T}, {D}], one thread, median of {args.repeats}; "
        f"outputs and gradients {'identical' if same else 'DIFFERENT'}"
    )
    for path, ms in median.items():
        print(f"  {path:10s} {ms:6.2f} ms forward + backward   {median['PyTorch'] / ms:5.2f}x")
    layers = cfg.n_layer * 2
    print(
        f"  a training step ({cfg.n_layer} layers, queries and keys): {median['PyTorch'] * layers:.0f} vs "
        f"{median['C kernels'] * layers:.0f} ms"
    )


if __name__ == "__main__":
    main()
