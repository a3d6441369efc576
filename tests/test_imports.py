"""Every module of the package imports on its own, first, in a fresh interpreter.

Bug: `from workbench.encoders.single_digit import SingleDigit` in a new interpreter (and so
`pytest tests/test_token_module.py` alone) failed with a circular import through ntl.py, which
the whole suite never saw: some earlier test had always imported the encodings in another order.

A fresh `python -c "import X"` per module costs seconds each here (torch's import alone), so one
process imports the third-party libraries the package uses (found by a first child that imports
the whole package) and then forks one child per module, two at a time: each child starts with no
module of the workbench imported, which is what the bug needs, without paying for torch again.
Two more children check that the encodings' registry keeps its order whichever module came first.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

IMPORT_EACH = r"""
import importlib, io, os, sys, traceback
from pathlib import Path

root = Path(sys.argv[1])
modules = sorted(
    ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
    for p in (root / "workbench").rglob("*.py")
)
OURS = ("workbench", "__main__", "__mp_main__")


def child(module):
    # a command's __main__ runs the command when imported: ask it for its --help, quietly
    sys.argv = [module, "--help"]
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        importlib.import_module(module)
    except SystemExit as stop:
        if module.endswith("__main__") and stop.code in (0, None):
            os._exit(0)
        print(f"{module}: SystemExit({stop.code!r})", file=sys.stderr)
        os._exit(1)
    except BaseException:
        lines = traceback.format_exc().strip().splitlines()
        print(f"{module}: {lines[-1]} ({lines[-3].strip() if len(lines) > 2 else ''})", file=sys.stderr)
        os._exit(1)
    os._exit(0)


# the libraries the package imports, found by a child that imports all of it (never this process)
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(read)
    for module in modules:
        if not module.endswith("__main__"):
            try:
                importlib.import_module(module)
            except BaseException:
                pass
    with os.fdopen(write, "w") as f:
        f.write(" ".join(n for n in sys.modules if n.split(".")[0] not in OURS))
    os._exit(0)
os.close(write)
with os.fdopen(read) as f:
    libraries = f.read().split()
os.waitpid(pid, 0)
for name in libraries:
    if name not in sys.modules:
        try:
            importlib.import_module(name)
        except BaseException:
            pass
assert not [n for n in sys.modules if n.split(".")[0] == "workbench"], "the parent imported the workbench"

failed, running = [], {}


def reap():
    pid, status = os.wait()
    if status:
        failed.append(running[pid])
    del running[pid]


for module in modules:
    if len(running) >= 2:
        reap()
    pid = os.fork()
    if pid == 0:
        child(module)
    running[pid] = module
while running:
    reap()
print(f"{len(modules)} modules, {len(failed)} failed: {sorted(failed)}")


def names_after(*first):
    # the registry's order in a child that imported `first` before anything else of the workbench
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        for module in first:
            importlib.import_module(module)
        from workbench import encoders

        with os.fdopen(write, "w") as f:
            f.write(" ".join(encoders.names()))
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        names = f.read()
    os.waitpid(pid, 0)
    return names


print("plain order:", names_after())
print("order after single_digit and abacus:", names_after("workbench.encoders.single_digit", "workbench.encoders.abacus"))
sys.exit(1 if failed else 0)
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks a child per module")
def test_every_module_imports_first_in_a_fresh_interpreter():
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert " 0 failed" in done.stdout
    # the registry's order (the paper's five first) does not depend on which module came first
    plain, after = (line.split(": ", 1)[1] for line in done.stdout.splitlines()[-2:])
    assert plain == after and plain.split()[:5] == ["bittokens", "fone", "xval", "single_digit", "triple_digit"]
