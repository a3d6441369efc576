"""The nine tasks as inspect-ai tasks, found through the package's `inspect_ai` entry point.

    inspect eval workbench/numeracy_multiplication --model hf/local -M model_path=PATH -M do_sample=false --limit 20
    inspect eval workbench/numeracy_sorting -T n=100 -T seed=1 ...
    inspect eval workbench/numeracy_minmax -T official=../shared/data/official_bittokens ...

One task per workbench task, `numeracy_<task>`: each sample is the frontier benchmark's chat, the
system prompt of appendix A.1 and the question as the user's turn, answered greedily when the
provider honours temperature 0 (Hugging Face models sample unless `-M do_sample=false`), at most
the task's `max_tokens` (the longest label in characters plus 64, as in the lm-eval pack). The
scorer is the workbench's (`workbench.harness.scoring`): each sample's score is a dict of the
five metrics, and the task reports the mean (and standard error) of each. Task options (`-T`): n,
seed, official (the authors' folder), decades (e.g. 0,1), max_digits; `questions` says what they do.

inspect-ai loads this module through the entry point; without inspect-ai installed it imports and
defines nothing (the workbench's own tests import every module).
"""

from __future__ import annotations

from . import questions as q
from .scoring import METRICS, metrics

try:
    import inspect_ai
except ModuleNotFoundError:  # the [harness] extra is not installed
    inspect_ai = None

PREFIX = "numeracy_"


def _decades(value):
    """-T decades=0,1 arrives as a list (of numbers or strings) or as the string "0,1"."""
    if value is None:
        return None
    parts = value if isinstance(value, (list, tuple)) else str(value).split(",")
    try:
        return [int(str(v).strip()) for v in parts]
    except ValueError:
        raise ValueError(f"decades must be two integers lo,hi (e.g. 0,1), got {value!r}") from None


def _define():
    """Register one inspect task per workbench task, named numeracy_<task>."""
    from inspect_ai import Task, task
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig
    from inspect_ai.scorer import Score, mean, scorer, stderr
    from inspect_ai.solver import generate

    @scorer(metrics={m: [mean(), stderr()] for m in METRICS}, name="numeracy_score")
    def numeracy_score():
        """The workbench's scorer, both readings (workbench.harness.scoring)."""

        async def score(state, target):
            response = state.output.completion if state.output else ""
            values = metrics(state.metadata["task"], response, target.text)
            return Score(value=values, answer=response, explanation=f"label {target.text}")

        return score

    def make(name):
        def build(n: int = q.RELEASED, seed: int = 0, official: str | None = None, decades=None, max_digits=None):
            digits = None if max_digits is None else int(max_digits)
            records = q.questions(name, int(n), int(seed), official, _decades(decades), digits)
            samples = [
                Sample(
                    id=r["id"],
                    input=[ChatMessageSystem(content=r["system_prompt"]), ChatMessageUser(content=r["text_prompt"])],
                    target=r["answer"],
                    metadata={k: r[k] for k in ("task", "prompt", "difficulty", "difficulty_sd")},
                )
                for r in records
            ]
            return Task(
                dataset=MemoryDataset(samples, name=f"{PREFIX}{name}"),
                solver=generate(),
                scorer=numeracy_score(),
                config=GenerateConfig(temperature=0.0, max_tokens=q.answer_tokens(records)),
            )

        build.__name__ = build.__qualname__ = f"{PREFIX}{name}"
        build.__doc__ = f"The workbench's {name} task (the paper's frontier prompt), scored by the workbench."
        return task(name=f"{PREFIX}{name}")(build)

    return {f"{PREFIX}{name}": make(name) for name in q.names()}


TASKS = _define() if inspect_ai is not None else {}
globals().update(TASKS)
