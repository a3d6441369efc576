"""The house's commit-message rule, as a git commit-msg hook (.pre-commit-config.yaml runs it):
a subject of at most 72 characters, and a blank line before the body that says why.

    python scripts/commit_message.py .git/COMMIT_EDITMSG       # exit 1 with one line if it breaks the rule
    python scripts/commit_message.py --range main~20..main      # check the subjects of existing commits
"""

import subprocess
import sys

LIMIT = 72


def problem(message: str) -> str:
    """Why `message` breaks the rule ("" when it keeps it); comment lines (#) are git's, not the message."""
    lines = [line for line in message.splitlines() if not line.startswith("#")]
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return "the message is empty"
    subject = lines[0]
    if len(subject) > LIMIT:
        return f"the subject has {len(subject)} characters, more than {LIMIT}: {subject[:LIMIT]}..."
    if len(lines) > 1 and lines[1].strip():
        return "the subject is followed by text without a blank line: put the why in a body after a blank line"
    return ""


def main(argv: list[str]) -> int:
    if argv[:1] == ["--range"] and len(argv) == 2:
        subjects = subprocess.run(["git", "log", "--format=%h %s", argv[1]], capture_output=True, text=True, check=True)
        bad = [line for line in subjects.stdout.splitlines() if len(line.split(" ", 1)[1]) > LIMIT]
        for line in bad:
            print(f"{line.split(' ', 1)[0]}: subject of {len(line.split(' ', 1)[1])} characters")
        return 1 if bad else 0
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        why = problem(f.read())
    if why:
        print(f"commit message: {why}", file=sys.stderr)
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
