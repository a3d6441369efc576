"""The README and docs/ link to each other's files and headings: every such link must arrive, so
that a renamed heading or a moved file is found here, not by a reader."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings (outside code blocks); a repeated one gets -1, -2, ..."""
    found, seen, code = set(), {}, False
    for line in page.read_text().splitlines():
        code ^= line.startswith("```")
        if not code and (m := re.match(r"#{1,6} (.*)", line)):
            s = slug(m.group(1))
            found.add(s if s not in seen else f"{s}-{seen[s]}")
            seen[s] = seen.get(s, 0) + 1
    return found


def links(page: Path) -> list[str]:
    """The page's relative links (no scheme), as written."""
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", page.read_text()) if not re.match(r"[a-z]+:", t)]


def test_slug_is_github_s():
    assert slug("Study 3 — budget × precision, where the paper's claim lives") == (
        "study-3--budget--precision-where-the-papers-claim-lives"
    )
    assert slug("SmolLM2-135M retrofit: results") == "smollm2-135m-retrofit-results"


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_link_arrives(page):
    broken = []
    for target in links(page):
        file, _, fragment = target.partition("#")
        dest = (page.parent / file) if file else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_pages_link_to_each_other():
    """The check above is not empty: the README reaches docs/, and the study's index the sections
    of its pages."""
    assert sum(len(links(p)) for p in PAGES) > 50
    assert sum("#" in t for t in links(ROOT / "docs" / "study" / "README.md")) >= 15


def test_the_commit_message_rule():
    """scripts/commit_message.py, the commit-msg hook: a subject of at most 72 characters, a blank
    line before the body; git's comment lines are not the message."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("commit_message", ROOT / "scripts" / "commit_message.py")
    rule = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rule)
    assert rule.problem("Keep every run's curves\n\nBecause they explain it.\n") == ""
    assert rule.problem("x" * 72) == "" and rule.problem("# git's help\n" + "x" * 72) == ""
    assert rule.problem("x" * 73).startswith("the subject has 73 characters, more than 72")
    assert rule.problem("subject\nbody at once").startswith("the subject is followed by text without a blank line")
    assert rule.problem("# only git's lines\n\n") == "the message is empty"
