"""Test-session set-up shared by every test file."""

import signal

# A shell that starts a command in the background (`make test &`, `nohup ... &`) starts it with
# Ctrl-C ignored, and an ignored signal is passed on to every child: the training and plan
# processes that the Ctrl-C tests interrupt would then never hear it. A handler (unlike "ignore")
# is reset to the default in a child, so each child Python installs its own KeyboardInterrupt.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
