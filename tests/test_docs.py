"""The README and docs/ link to each other's files and headings: every such link must arrive, so
that a renamed heading or a moved file is found here, not by a reader."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
# A page a reader scrolls past this is split into a folder with an index, as docs/study/ was.
MOST_LINES = 600


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


@pytest.mark.parametrize("folder", ["docs", "docs/study"])
def test_each_folder_s_index_links_every_page_in_it(folder):
    """A newcomer finds every page from the README: it links docs/README.md, which links each page
    of docs/ and the study's index, which links each page of docs/study/."""
    assert "docs/README.md" in links(ROOT / "README.md")
    index = ROOT / folder / "README.md"
    reached = {(index.parent / t.partition("#")[0]).resolve() for t in links(index) if t.partition("#")[0]}
    pages = {p.resolve() for p in index.parent.glob("*.md")} | {p.resolve() for p in index.parent.glob("*/README.md")}
    missing = sorted(p.relative_to(ROOT).as_posix() for p in pages - reached - {index.resolve()})
    assert not missing, f"{folder}/README.md does not link {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_no_page_is_longer_than_a_reader_scrolls(page):
    n = len(page.read_text().splitlines())
    assert n <= MOST_LINES, f"{_id(page)} has {n} lines, more than {MOST_LINES}: split it (see docs/study/README.md)"


def test_every_docs_path_the_code_names_exists():
    """Docstrings, comments, help texts and notebooks name the pages of docs/ by their path (and a
    heading's anchor after #): a moved page or heading is found here, not by a reader of an error
    message."""
    folders = ("workbench", "benchmarks", "scripts", "tests", "notebooks")
    code = [p for f in folders for p in (ROOT / f).rglob("*") if p.suffix in (".py", ".ipynb")]
    broken = []
    for path in code:
        for target in re.findall(r"\bdocs/[\w./-]*(?:#[\w-]+)?", path.read_text()):
            file, _, fragment = target.rstrip(".").partition("#")
            dest = ROOT / file
            if not dest.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                broken.append(f"{path.relative_to(ROOT)}: {target}: no such heading")
    assert not broken, broken


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
