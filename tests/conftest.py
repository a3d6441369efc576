"""Test-session set-up shared by every test file."""

import gc
import signal

import pytest

# A shell that starts a command in the background (`make test &`, `nohup ... &`) starts it with
# Ctrl-C ignored, and an ignored signal is passed on to every child: the training and plan
# processes that the Ctrl-C tests interrupt would then never hear it. A handler (unlike "ignore")
# is reset to the default in a child, so each child Python installs its own KeyboardInterrupt.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """Collect once more, then freeze what survives (`gc.freeze`), once the session's fixtures are
    torn down (trylast: after pytest's own teardown).

    Why: a pytest-xdist worker reports its end from this hook and only then runs pytest's
    unconfigure, which makes two full collections over everything the worker made in its hundreds
    of tests. The controller meanwhile tells it to stop, and execnet gives a worker 5 s before it
    sends it SIGINT. On a loaded machine the two collections took longer; the SIGINT landed in
    hypothesis's gc callback (Python code that runs inside a collection), where a KeyboardInterrupt
    cannot be raised, and a green run ended with "PytestUnraisableExceptionWarning ... gc_callback
    ... KeyboardInterrupt" after [100%]. Frozen objects are left out of later collections, so
    those two walk only what is made after this point and take milliseconds. This collection runs
    before the worker reports its end, and whatever it finds unraisable is still reported."""
    gc.collect()
    gc.freeze()
