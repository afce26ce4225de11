"""Every relative link in the README and the docs leads somewhere.

For README.md, bench/README.md, deploy/README.md and every docs/*.md: each markdown link
`[text](path)` or `[text](path#anchor)` that is not a URL names a file or folder that
exists (relative to the document), and an `#anchor` into a markdown file (or into the
document itself) names one of its headings. Anchors follow GitHub's rule: the heading's
text, lower-cased, without punctuation other than hyphens, spaces and underscores, spaces
turned into hyphens, and `-1`, `-2`, ... appended to repeated headings. Links inside code
(fenced blocks and backtick spans) are not links and are not checked.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted(
    [REPO / "README.md", REPO / "bench" / "README.md", REPO / "deploy" / "README.md"]
    + list((REPO / "docs").glob("*.md"))
)

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$", re.M)
URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


def prose(markdown: str) -> str:
    """The document without code: fenced blocks and code spans blanked out."""
    without_blocks = FENCE.sub("", markdown)
    return CODE_SPAN.sub(lambda m: "`" + "x" * (len(m.group(0)) - 2) + "`", without_blocks)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every anchor GitHub makes for the document's headings."""
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(FENCE.sub("", markdown)):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(document: Path) -> list[str]:
    """Each relative link of `document` that leads nowhere, with the reason."""
    text = document.read_text()
    problems = []
    for match in LINK.finditer(prose(text)):
        target = match.group(1)
        if URL.match(target):
            continue
        path, _, anchor = target.partition("#")
        where = (document.parent / path).resolve() if path else document
        if not where.exists():
            problems.append(f"{target}: no such file or folder ({where})")
        elif anchor and where.suffix == ".md" and where.is_file():
            if anchor not in anchors(where.read_text()):
                problems.append(f"{target}: no heading makes the anchor #{anchor} in {where}")
    return problems


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(document: Path) -> None:
    assert broken_links(document) == []


def test_the_documents_are_there() -> None:
    names = {str(p.relative_to(REPO)) for p in DOCUMENTS}
    expected = {"README.md", "bench/README.md", "deploy/README.md", "docs/usage.md"}
    assert expected <= names
    assert {"docs/operations.md", "docs/status.md", "docs/architecture.md"} <= names


def test_github_anchors() -> None:
    assert slug("Before a job: `vfl doctor`") == "before-a-job-vfl-doctor"
    assert slug("Scale-out: scale_out.py") == "scale-out-scale_outpy"
    assert slug("9. Online scoring") == "9-online-scoring"
    assert slug("Executors: a party's own cluster") == "executors-a-partys-own-cluster"
    assert anchors("# A\n\n## Tests\n\n```\n# not a heading\n```\n\n## Tests\n") == {
        "a",
        "tests",
        "tests-1",
    }


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Part two\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Doc\n\n## Here\n\n"
        "[ok](other.md) [ok](other.md#part-two) [ok](#here) [ok](https://example.org/x)\n"
        "`[code](missing.md)`\n\n```\n[code](missing.md)\n```\n"
        "[gone](missing.md) [bad anchor](other.md#part-three) [bad](#nowhere)\n"
    )
    problems = broken_links(doc)
    assert len(problems) == 3, problems
    assert [p.split(":")[0] for p in problems] == [
        "missing.md",
        "other.md#part-three",
        "#nowhere",
    ]
