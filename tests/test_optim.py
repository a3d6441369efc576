import io
import math
import sys

import pytest
import torch
from torch import nn

from workbench.training import optim
from workbench.training.optim import OptimConfig, apply_schedule, build_optimizers, lr_multiplier, muon_momentum


class Toy(nn.Module):
    """A tiny LM-shaped model with the four parameter groups the GPT exposes."""

    def __init__(self, vocab=11, d=8):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d)
        self.block = nn.Sequential(nn.Linear(d, 16, bias=False), nn.ReLU(), nn.Linear(16, d, bias=False))
        self.gain = nn.Parameter(torch.ones(d))
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embedding(ids)
        x = x + self.block(x * self.gain)
        return self.lm_head(x)

    def param_groups(self):
        return {
            "hidden": [self.block[0].weight, self.block[2].weight],
            "embedding": [self.embedding.weight],
            "head": [self.lm_head.weight],
            "scalar": [self.gain],
        }


def reference_multiplier(step, total, warmup_frac):
    warmup = round(warmup_frac * total)
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))


def test_lr_multiplier_shape():
    total = 1000  # warm-up = 100 steps
    assert lr_multiplier(0, total) == pytest.approx(1 / 100)
    assert lr_multiplier(49, total) == pytest.approx(0.5)
    assert lr_multiplier(99, total) == pytest.approx(1.0)
    assert lr_multiplier(100, total) == pytest.approx(1.0)
    assert lr_multiplier(550, total) == pytest.approx(0.5)  # half-way through the cosine
    assert lr_multiplier(1000, total) == pytest.approx(0.0, abs=1e-12)
    values = [lr_multiplier(s, total) for s in range(100, 1001)]
    assert all(a >= b for a, b in zip(values, values[1:]))


def test_lr_multiplier_rejects_bad_input():
    for args in [(-1, 10), (11, 10), (0, 0), (0, 10, 1.0), (0, 10, -0.1)]:
        with pytest.raises(ValueError):
            lr_multiplier(*args)


@pytest.mark.parametrize("floor", [0.0, 0.002])
def test_every_group_follows_the_schedule_down_to_its_floor(floor):
    """Warm-up: base x multiplier; cosine: floor + (base - floor) x multiplier, the floor being one
    absolute lr for every group (the authors' eta_min), never above a group's base."""
    torch.manual_seed(0)
    model, total = Toy(), 200
    cfg = OptimConfig(lr_floor=floor)
    optimizers = build_optimizers(model, cfg)
    base = {"hidden": 0.02, "embedding": 0.03, "head": 0.004, "scalar": 0.02}
    for step in [0, 5, 19, 20, 21, 100, 150, 199, 200]:
        apply_schedule(optimizers, step, total, cfg)
        mult = reference_multiplier(step, total, 0.1)
        seen = set()
        for opt in optimizers:
            for group in opt.param_groups:
                b = base[group["name"]]
                want = b * mult if step < 20 else floor + (b - floor) * mult
                assert group["lr"] == pytest.approx(want)
                seen.add(group["name"])
        assert seen == set(base)
    assert {g["lr"] for o in optimizers for g in o.param_groups} == {floor}  # the end of the cosine


def test_muon_momentum_warmup():
    assert muon_momentum(0) == pytest.approx(0.85)
    assert muon_momentum(150) == pytest.approx(0.90)
    assert muon_momentum(300) == pytest.approx(0.95)
    assert muon_momentum(10_000) == pytest.approx(0.95)
    model = Toy()
    optimizers = build_optimizers(model)
    for step, expected in [(0, 0.85), (30, 0.86), (299, 0.85 + 0.1 * 299 / 300), (400, 0.95)]:
        apply_schedule(optimizers, step, 1000)
        muon = [o for o in optimizers if isinstance(o, (torch.optim.Muon, optim.Float32Muon))]
        assert muon[0].param_groups[0]["momentum"] == pytest.approx(expected)


def test_muon_gets_exactly_the_hidden_matrices_with_paper_settings():
    model = Toy()
    optimizers = build_optimizers(model)
    muon = [o for o in optimizers if isinstance(o, (torch.optim.Muon, optim.Float32Muon))]
    adam = [o for o in optimizers if isinstance(o, torch.optim.Adam)]
    assert len(muon) == 1 and len(adam) == 1 and len(optimizers) == 2
    muon_params = {id(p) for g in muon[0].param_groups for p in g["params"]}
    assert muon_params == {id(model.block[0].weight), id(model.block[2].weight)}
    g = muon[0].param_groups[0]
    assert (g["lr"], g["weight_decay"], g["nesterov"]) == (0.02, 0.0, True)
    for g in adam[0].param_groups:
        assert g["betas"] == (0.9, 0.95) and g["weight_decay"] == 0.0
        assert all(id(p) not in muon_params for p in g["params"])
    n_opt = sum(len(g["params"]) for o in optimizers for g in o.param_groups)
    assert n_opt == len(list(model.parameters()))


def test_adam_runs_foreach_and_steps_bit_for_bit_like_torchs_per_tensor_adam():
    """The Adam of build_optimizers takes one foreach call per group: the oracle is torch's
    per-tensor loop (its CPU default), parameters equal bit for bit after scheduled steps."""
    torch.manual_seed(0)
    ours, theirs = Toy(), Toy()
    theirs.load_state_dict(ours.state_dict())
    start = ours.embedding.weight.detach().clone()
    adam = build_optimizers(ours)[-1]
    assert all(g["foreach"] for g in adam.param_groups)
    reference = torch.optim.Adam(
        [dict(params=g["params"], lr=g["lr"]) for g in build_optimizers(theirs)[-1].param_groups],
        betas=(0.9, 0.95),
        eps=1e-10,
        foreach=False,
    )
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    for step in range(6):
        for model, opt in ((ours, adam), (theirs, reference)):
            for g, lr in zip(opt.param_groups, (0.03, 0.004, 0.02)):
                g["lr"] = lr * lr_multiplier(step, 6)
            model(ids).square().mean().backward()
            opt.step()
            model.zero_grad(set_to_none=True)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        if a is not ours.block[0].weight and a is not ours.block[2].weight:  # Muon's are not stepped here
            assert torch.equal(a, b)
    assert not torch.equal(ours.embedding.weight, start)  # the steps moved it


def test_adamw_ablation_replaces_muon():
    optimizers = build_optimizers(Toy(), OptimConfig(optimizer="adamw"))
    assert not any(isinstance(o, (torch.optim.Muon, optim.Float32Muon)) for o in optimizers)
    assert isinstance(optimizers[0], torch.optim.AdamW)
    with pytest.raises(ValueError, match="optimizer"):
        build_optimizers(Toy(), OptimConfig(optimizer="sgd"))


def test_group_errors():
    class Missing(Toy):
        def param_groups(self):
            groups = super().param_groups()
            groups["scalar"] = []
            return groups

    class Twice(Toy):
        def param_groups(self):
            groups = super().param_groups()
            groups["head"].append(self.embedding.weight)
            return groups

    class FlatHidden(Toy):
        def param_groups(self):
            groups = super().param_groups()
            groups["hidden"].append(groups.pop("scalar")[0])
            return groups

    with pytest.raises(ValueError, match="no optimizer group"):
        build_optimizers(Missing())
    with pytest.raises(ValueError, match="groups 'embedding' and 'head'"):
        build_optimizers(Twice())
    with pytest.raises(ValueError, match="2-D"):
        build_optimizers(FlatHidden())


@pytest.mark.parametrize("kind", ["muon", "adamw"])
def test_toy_model_learns(kind):
    torch.manual_seed(0)
    model = Toy()
    ids = torch.randint(0, 11, (4, 6), generator=torch.Generator().manual_seed(1))
    targets = (ids + 1) % 11  # learnable: next id
    optimizers = build_optimizers(model, OptimConfig(optimizer=kind))

    def loss_fn():
        return nn.functional.cross_entropy(model(ids).flatten(0, 1), targets.flatten())

    first = loss_fn().item()
    total = 40
    for step in range(total):
        apply_schedule(optimizers, step, total)
        loss = loss_fn()
        loss.backward()
        for opt in optimizers:
            opt.step()
            opt.zero_grad(set_to_none=True)
    assert loss_fn().item() < 0.7 * first


def test_optimizer_state_survives_a_weights_only_checkpoint():
    torch.manual_seed(0)
    model = Toy()
    optimizers = build_optimizers(model)
    apply_schedule(optimizers, 3, 100)
    model(torch.tensor([[1, 2, 3]])).sum().backward()
    for opt in optimizers:
        opt.step()
    buffer = io.BytesIO()
    torch.save([opt.state_dict() for opt in optimizers], buffer)
    buffer.seek(0)
    states = torch.load(buffer, weights_only=True)
    fresh = build_optimizers(model)
    for opt, state in zip(fresh, states):
        opt.load_state_dict(state)
    for a, b in zip(optimizers, fresh):
        assert [g["lr"] for g in a.param_groups] == [g["lr"] for g in b.param_groups]
        assert [g["initial_lr"] for g in a.param_groups] == [g["initial_lr"] for g in b.param_groups]
        for p in a.state:
            for key, value in a.state[p].items():
                assert torch.equal(torch.as_tensor(value), torch.as_tensor(b.state[p][key]))


@pytest.mark.parametrize("shape", [(256, 1024), (1024, 256), (96, 384), (64, 64), (40, 70)])
def test_float32_newton_schulz_is_the_quintic_iteration(shape):
    """Our fp32 Newton-Schulz (Gram form for wide matrices) against the textbook iteration in
    float64, X <- a X + (b A + c A^2) X with A = X X^T."""
    a, b, c = OptimConfig().ns_coefficients
    grad = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    x = grad.double()
    x = (x.T if shape[0] > shape[1] else x) / x.norm()
    for _ in range(5):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    expected = x.T if shape[0] > shape[1] else x
    got = optim._newton_schulz_fp32(grad, (a, b, c), 5, 1e-7)
    assert got.dtype == torch.float32 and got.shape == grad.shape
    assert torch.allclose(got.double(), expected, rtol=0, atol=1e-5 * expected.abs().max().item())


def test_importing_workbench_leaves_torch_alone():
    """Nothing in torch is replaced: torch's Newton-Schulz is torch's own function after import."""
    import subprocess
    import sys

    code = (
        "import torch.optim._muon as m; before = m._zeropower_via_newtonschulz; import workbench, "
        "workbench.training.train, workbench.training.optim; assert m._zeropower_via_newtonschulz is before; "
        "assert m._zeropower_via_newtonschulz.__module__ == 'torch.optim._muon'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("nesterov, adjust", [(True, "original"), (False, "match_rms_adamw")])
def test_float32_muon_is_torch_muon_with_a_float32_iteration(monkeypatch, nesterov, adjust):
    """Step for step, Float32Muon equals torch.optim.Muon whose iteration is replaced (here, in the
    test only) by the same float32 function: momentum, Nesterov, lr adjustment and weight decay
    are torch's."""
    from torch.optim import _muon

    torch.manual_seed(0)
    ours, theirs = Toy(), Toy()
    theirs.load_state_dict(ours.state_dict())
    settings = dict(lr=0.05, weight_decay=0.1, momentum=0.9, nesterov=nesterov, adjust_lr_fn=adjust)
    a = optim.Float32Muon(ours.param_groups()["hidden"], **settings)
    monkeypatch.setattr(_muon, "_zeropower_via_newtonschulz", optim._newton_schulz_fp32)
    b = torch.optim.Muon(theirs.param_groups()["hidden"], **settings)
    ids = torch.randint(0, 11, (4, 6), generator=torch.Generator().manual_seed(1))
    for _ in range(4):
        for model, opt in ((ours, a), (theirs, b)):
            model.zero_grad()
            model(ids).square().mean().backward()
            opt.step()
    for p, q in zip(ours.param_groups()["hidden"], theirs.param_groups()["hidden"]):
        assert torch.equal(p, q)


@pytest.mark.parametrize("amx", [False, True])
def test_newton_schulz_precision_is_one_recipe_on_every_cpu(monkeypatch, amx):
    """auto: float32 (our Float32Muon) on every CPU, with AMX or without (a machine-dependent choice
    trained another recipe on each CPU); torch's own bf16 Muon on CUDA. An explicit choice wins."""
    monkeypatch.setattr(optim, "cpu_has_bf16_matrix_units", lambda: amx)
    cpu = torch.device("cpu")
    assert optim.newton_schulz_dtype(OptimConfig(), cpu) == "float32"
    assert optim.newton_schulz_dtype(OptimConfig(), torch.device("cuda")) == "bfloat16"
    assert optim.newton_schulz_dtype(OptimConfig(newton_schulz="bfloat16"), cpu) == "bfloat16"
    assert build_optimizers(Toy())[0].precision == "float32"
    assert build_optimizers(Toy(), OptimConfig(newton_schulz="bfloat16"))[0].precision == "bfloat16"
    with pytest.raises(ValueError, match="newton_schulz"):
        optim.newton_schulz_dtype(OptimConfig(newton_schulz="fp16"), cpu)


@pytest.mark.parametrize("nesterov, adjust", [(True, "original"), (False, "match_rms_adamw")])
def test_bf16_muon_is_torch_muon(nesterov, adjust):
    """precision bfloat16 is torch.optim.Muon itself, step for step (its own iteration)."""
    torch.manual_seed(0)
    ours, theirs = Toy(), Toy()
    theirs.load_state_dict(ours.state_dict())
    settings = dict(lr=0.05, weight_decay=0.1, momentum=0.9, nesterov=nesterov, adjust_lr_fn=adjust)
    a = optim.Muon(ours.param_groups()["hidden"], precision="bfloat16", **settings)
    b = torch.optim.Muon(theirs.param_groups()["hidden"], **settings)
    ids = torch.randint(0, 11, (4, 6), generator=torch.Generator().manual_seed(1))
    for _ in range(3):
        for model, opt in ((ours, a), (theirs, b)):
            model.zero_grad()
            model(ids).square().mean().backward()
            opt.step()
    for p, q in zip(ours.param_groups()["hidden"], theirs.param_groups()["hidden"]):
        assert torch.equal(p, q)


SPLIT_MUON = """
import sys, torch, torch.distributed as dist
from workbench.training import optim


def muon(precision):
    torch.manual_seed(0)
    shapes = [(6, 5), (5, 6), (7, 3), (4, 4), (3, 9)]
    params = [torch.nn.Parameter(torch.randn(*s)) for s in shapes]
    opt = optim.Muon(params, lr=0.05, weight_decay=0.1, momentum=0.9, precision=precision)
    calls = []
    iterate = opt._iterate
    opt._iterate = lambda update, group: calls.append(tuple(update.shape)) or iterate(update, group)
    for step in range(3):
        for p in params:  # the same averaged gradient on every rank, as under DDP
            p.grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(step * 10 + p.numel()))
        opt.step()
    return {"params": [p.detach() for p in params], "calls": calls}


if __name__ == "__main__":
    rank, world = int(sys.argv[1]), int(sys.argv[2])
    dist.init_process_group("gloo", init_method=f"file://{sys.argv[3]}", rank=rank, world_size=world)
    torch.save({precision: muon(precision) for precision in ("float32", "bfloat16")}, sys.argv[4])
    dist.destroy_process_group()
"""


@pytest.mark.slow
def test_muon_split_over_ranks_gives_the_single_process_result(tmp_path):
    """Rank r orthogonalizes matrices r, r + world, ... and an all-gather shares the updates: with 1,
    2 and 3 gloo processes every rank ends with the single process's weights, bit for bit, in both
    precisions (one process runs both), and each matrix was orthogonalized by exactly one rank."""
    import subprocess

    script = tmp_path / "split_muon.py"
    script.write_text(SPLIT_MUON)
    results = {}
    for world in (1, 2, 3):  # each in fresh processes: this one's numerics may have been switched by other tests
        rendezvous = tmp_path / f"rendezvous{world}"
        procs = [
            subprocess.Popen(
                [sys.executable, str(script), str(r), str(world), str(rendezvous), str(tmp_path / f"w{world}r{r}.pt")]
            )
            for r in range(world)
        ]
        assert all(p.wait(timeout=120) == 0 for p in procs)
        results[world] = [torch.load(tmp_path / f"w{world}r{r}.pt", weights_only=True) for r in range(world)]
    single = results.pop(1)[0]
    for precision, alone in single.items():
        assert len(alone["calls"]) == 5 * 3
        for world, ranks in results.items():
            for out in ranks:
                assert all(torch.equal(a, b) for a, b in zip(out[precision]["params"], alone["params"])), (
                    world,
                    precision,
                )
            shapes = sorted(s for out in ranks for s in out[precision]["calls"])
            assert shapes == sorted(alone["calls"])  # each matrix once over all ranks, every step
