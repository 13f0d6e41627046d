"""The documentation holds together (issue #17): every ``docs/<file>.md`` the code names exists
(and the section, when a ``#anchor`` is named), every relative link in README.md and
docs/*.md reaches a file (and heading), and the README stays a page a newcomer reads in ten
minutes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 160

# where code and configuration may name a docs/ file (tests/data is data from elsewhere)
CODE_PLACES = ["cranfield", "backend", "service", "worker", "tests", "bench"]
CODE_FILES = ["Makefile", "Dockerfile", "openapi.yaml", "pyproject.toml", "docker-compose.yml"]
CODE_SUFFIXES = {".py", ".yaml", ".yml", ".toml", ".cfg", ".txt", ".md", ".html"}
DOCS_REFERENCE = re.compile(r"(?<![\w/.-])docs/([\w.-]+\.md)(#[\w-]+)?")
# [text](target) in Markdown, not images of URLs with a scheme, not in-page links alone
MARKDOWN_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def code_files() -> list[Path]:
    files = [ROOT / name for name in CODE_FILES if (ROOT / name).is_file()]
    for place in CODE_PLACES:
        for path in sorted((ROOT / place).rglob("*")):
            if (path.is_file() and path.suffix in CODE_SUFFIXES
                    and "data" not in path.relative_to(ROOT).parts
                    and "__pycache__" not in path.parts):
                files.append(path)
    return files


def markdown_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings: lower case, punctuation dropped, spaces to
    hyphens (a repeated heading gets -1, -2…)."""
    seen: dict[str, int] = {}
    out = set()
    in_fence = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        if in_fence or not line.startswith("#"):
            continue
        text = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def code_references() -> list[tuple[str, str, str]]:
    refs = []
    for path in code_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in DOCS_REFERENCE.finditer(text):
            refs.append((str(path.relative_to(ROOT)), match.group(1), match.group(2) or ""))
    return refs


def markdown_links() -> list[tuple[str, str]]:
    links = []
    for page in markdown_pages():
        in_fence = False
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.startswith("```"):
                in_fence = not in_fence
            if in_fence:
                continue
            for target in MARKDOWN_LINK.findall(line):
                if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, mailto: …
                    links.append((str(page.relative_to(ROOT)), target))
    return links


def test_the_code_names_docs_files_at_all():
    """The scan finds what it is meant to: the references the engine's docstrings make."""
    named = {name for _, name, _ in code_references()}
    assert "inputs.md" in named


@pytest.mark.parametrize("where, name, anchor", code_references(),
                         ids=lambda v: v if isinstance(v, str) else None)
def test_every_docs_file_the_code_names_exists(where, name, anchor):
    target = ROOT / "docs" / name
    assert target.is_file(), f"{where} names docs/{name}, which does not exist"
    if anchor:
        assert anchor[1:] in anchors(target), f"{where} names docs/{name}{anchor}: no such section"


@pytest.mark.parametrize("page, target", markdown_links(),
                         ids=lambda v: v if isinstance(v, str) else None)
def test_every_relative_link_in_the_documentation_resolves(page, target):
    file_part, _, anchor = target.partition("#")
    base = ROOT / Path(page).parent
    resolved = (base / file_part).resolve() if file_part else ROOT / page
    assert resolved.exists(), f"{page} links to {target}: no such file"
    assert ROOT in resolved.parents or resolved == ROOT, f"{page} links outside the repository"
    if anchor and resolved.suffix == ".md":
        assert anchor in anchors(resolved), f"{page} links to {target}: no such section"


def test_the_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines; keep it to {README_MAX_LINES} and move the rest to docs/")


def test_the_readme_links_every_docs_page():
    """A page in docs/ that the README does not link is a page nobody finds."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {Path(t.partition("#")[0]).name for t in MARKDOWN_LINK.findall(readme)}
    reachable = set(linked)
    for page in sorted((ROOT / "docs").glob("*.md")):  # one hop from a linked page counts
        if page.name in linked:
            reachable |= {Path(t.partition("#")[0]).name
                          for t in MARKDOWN_LINK.findall(page.read_text(encoding="utf-8"))}
    missing = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name not in reachable)
    assert not missing, f"docs pages nobody links to from README.md (or a page it links): {missing}"
