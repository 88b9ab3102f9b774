"""The README is for a user who just found the project (issue #37, item 6): short, without
commit hashes, its test command the one CI runs; and every relative link of the README,
paper_checks.md and docs/*.md leads to a file (and to a heading, where it names one)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 150
DOCS = [README, ROOT / "paper_checks.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
HEX = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{7,40}(?![0-9A-Za-z])")


def test_the_readme_is_short():
    n = len(README.read_text().splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines (at most {MAX_LINES}: details go to docs/)"


def commits_among(tokens: set[str]) -> list[str]:
    """The tokens that name a commit of this repository (`git cat-file`)."""
    if not tokens:
        return []
    query = "".join(f"{t}^{{commit}}\n" for t in sorted(tokens))
    done = subprocess.run(
        ["git", "cat-file", "--batch-check"],
        cwd=ROOT,
        input=query,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    answers = done.stdout.splitlines()
    return [t for t, a in zip(sorted(tokens), answers, strict=True) if not a.endswith("missing")]


def in_a_git_checkout() -> bool:
    if shutil.which("git") is None:
        return False
    done = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"], cwd=ROOT, capture_output=True, text=True
    )
    return done.returncode == 0 and done.stdout.strip() == "true"


@pytest.mark.skipif(not in_a_git_checkout(), reason="needs git and the repository's history")
def test_the_readme_names_no_commit():
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    assert commits_among({head[:7], "0000000"}) == [head[:7]]  # the check can fail
    found = commits_among(set(HEX.findall(README.read_text())))
    assert not found, f"README.md names commits {found}: history belongs in git"


def ci_test_command() -> str:
    """The install-and-test line of .ci/run."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    found = [line.strip() for line in lines if line.strip().startswith("python3 -m venv")]
    assert len(found) == 1, found
    return found[0]


def test_ci_runs_exactly_the_readmes_test_command():
    command = ci_test_command()
    assert "pytest" in command and "ruff check ." in command
    code_lines = [line.strip() for line in README.read_text().splitlines()]
    assert command in code_lines, f"README.md does not show .ci/run's command: {command}"


def test_the_readme_has_the_main_job_command():
    assert any(
        line.strip().endswith("python -m empirical reproduce")
        and line.strip().startswith("python3 -m venv")
        for line in README.read_text().splitlines()
    )


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    out: set[str] = set()
    fenced = False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            base = slug(line.lstrip("#"))
            name, n = base, 0
            while name in out:
                n += 1
                name = f"{base}-{n}"
            out.add(name)
    return out


def links(path: Path) -> list[tuple[int, str]]:
    out, fenced = [], False
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            out.append((n, match.group(1) or match.group(2)))
    return out


def test_slugs_and_links_are_read_as_github_does(tmp_path):
    page = tmp_path / "a.md"
    page.write_text("# A title\n## Figure 3: sweeps (`x`)\n## A title\n[b](b.md#c) `[no](x)`\n")
    assert anchors(page) == {"a-title", "figure-3-sweeps-x", "a-title-1"}
    assert links(page) == [(4, "b.md#c")]


DOC_LINKS = [
    (path, n, target)
    for path in DOCS
    for n, target in links(path)
    if not re.match(r"[a-z]+:", target)  # http:, https:, mailto:
]


def test_the_docs_have_links():
    assert len(DOC_LINKS) > 50


@pytest.mark.parametrize(
    "path, n, target",
    DOC_LINKS,
    ids=[f"{p.relative_to(ROOT)}:{n}" for p, n, _ in DOC_LINKS],
)
def test_a_relative_link_resolves(path, n, target):
    where = f"{path.relative_to(ROOT)}:{n}: {target}"
    file_part, _, anchor = target.partition("#")
    dest = (path.parent / file_part).resolve() if file_part else path
    assert dest.is_file(), f"{where}: no such file"
    if anchor and dest.suffix == ".md":
        assert anchor in anchors(dest), f"{where}: no heading #{anchor} in {dest.name}"
