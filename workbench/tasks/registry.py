"""The task registry: every task module registers its tasks here when the package imports it.
(Apart from the package's __init__ so that the task modules import it without importing the
package that imports them.)"""

from __future__ import annotations

from contextlib import contextmanager

from .base import Task

_REGISTRY: dict[str, Task] = {}


def register(task: Task) -> Task:
    """Make `task` available under its name (registration order = the order of `names()`)."""
    if task.name in _REGISTRY:
        raise ValueError(f"task {task.name!r} is registered twice")
    _REGISTRY[task.name] = task
    return task


@contextmanager
def registered(task: Task):
    """Register `task` for the duration of a `with` block (a task defined in a test)."""
    register(task)
    try:
        yield task
    finally:
        del _REGISTRY[task.name]
