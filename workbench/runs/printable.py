"""Text read from files, made safe to print to a terminal.

A name or a cell read from a run's or a study's files is printed by the commands (compare's table,
the leaderboard, every one-line error). Printed raw, an escape sequence in it (ESC ] 0 ; ... BEL
retitles the terminal, ESC [ 2 J clears it) would act instead of showing. `printable` shows every
control character as Python writes it in a string ("\\x1b"), so the text reads as what the file holds.
"""

from __future__ import annotations

import re

# C0 and C1 controls and DEL; newlines are kept where a message or table is several lines on purpose
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text, keep: str = "") -> str:
    """`text` (str() of it) with each control character not in `keep` written as its escape:
    \\x1b, \\r, \\n (unless kept), \\x9b."""
    return _CONTROL.sub(lambda m: m[0] if m[0] in keep else repr(m[0])[1:-1], str(text))
