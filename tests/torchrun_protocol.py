"""Run under torchrun by tests/test_gpu_path.py (2 gloo processes): a protocol of three tiny runs in
one process, as paper-tier, ablations and study call train(); then the evaluation shared out over
the ranks against the same questions answered by one process. Prints PROTOCOL DONE at the end."""

import sys
from pathlib import Path

import torch.distributed as dist

from workbench import encoders, tasks
from workbench.measures.evaluate import evaluate
from workbench.model.gpt import GPT
from workbench.runs import distributed
from workbench.runs.checkpoints import load_checkpoint
from workbench.tokenizer import Tokenizer
from workbench.training.train import TrainConfig, train

TINY = dict(
    encoding="bittokens",
    tasks=("addition",),
    preset="cpu-tiny",
    batch_size=1,
    tokens=2 * 128 * 4,
    pool_size=100,
    val_samples=4,
    test_samples=4,
    eval_every=4,
    checkpoint_every=4,
    decades=(0, 1),
    max_digits=2,
    threads=1,
)

out = Path(sys.argv[1])
groups = []
for seed in range(3):
    train(TrainConfig.of(**TINY, seed=seed, out=str(out / f"run{seed}")))
    groups.append(dist.group.WORLD)
# one group for the life of the process: a run that destroyed it would leave the next to build another
assert dist.is_initialized() and all(group is groups[0] for group in groups), "the process group was re-created"

tok = Tokenizer("bittokens")
model = GPT(TrainConfig.of(**TINY).model_config(), encoders.get("bittokens"), tok.vocab_size, tok.num_id)
model.load_state_dict(load_checkpoint(out / "run0" / "best.pt"))
frames = {
    "addition": tasks.generate("addition", 2 * distributed.BATCH + 5, seed=3, split="val", decades=(0, 1), max_digits=2)
}
rank, world = dist.get_rank(), dist.get_world_size()
shared = distributed.evaluate_shared(model, tok, frames, None, rank, world)
assert shared.equals(evaluate(model, tok, frames)), "the shared-out evaluation differs from one process's"
print("PROTOCOL DONE", flush=True)
