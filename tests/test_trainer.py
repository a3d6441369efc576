"""The Trainer contract (workbench/training/trainer.py): the training loop's `Run` and the
retrofit's `Job` both implement it, so `adapt.evaluate_and_adapt` and `adapt.build_sampler` serve
both. Bug it guards: the contract lived in a docstring, and a member renamed on one side only would
have surfaced as an AttributeError at the first evaluation of that side's runs."""

import dataclasses
import inspect

from workbench.retrofit.finetune import Job
from workbench.training import adapt
from workbench.training.train import Run
from workbench.training.trainer import Trainer

MEMBERS = set(Trainer.__annotations__) | {
    name for name, value in vars(Trainer).items() if inspect.isfunction(value) and not name.startswith("_")
}


def test_run_and_job_implement_every_member_of_the_trainer():
    assert MEMBERS >= {"cfg", "val", "sampler", "balancer", "normalizer", "state", "answer", "keep_best"}
    for cls in (Run, Job):
        assert Trainer in cls.__mro__, cls
        held = {f.name for f in dataclasses.fields(cls)} | set(dir(cls))
        assert MEMBERS <= held, (cls.__name__, sorted(MEMBERS - held))
        for name in MEMBERS & {n for n, v in vars(Trainer).items() if inspect.isfunction(v)}:
            assert getattr(cls, name) is not getattr(Trainer, name), f"{cls.__name__}.{name} is the protocol's stub"


def test_evaluate_and_adapt_takes_a_trainer_and_build_sampler_the_settings():
    assert inspect.signature(adapt.evaluate_and_adapt).parameters["trainer"].annotation in (Trainer, "Trainer")
    assert list(inspect.signature(adapt.build_sampler).parameters) == ["cfg", "encoding", "tok", "pools", "total_steps"]
