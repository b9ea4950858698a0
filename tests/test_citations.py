"""Papers are cited by author and year (docs/references.md), never by a file or tracker number."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
# built from parts so that this file does not match itself
NUMBERED = re.compile(r"\b[Ss]eeds? \d{3}\b|\b[Ii]ssues? #?\d{1,3}\b")
WHERE = ("README.md", "docs", "reshape", "scheduler", "apps", "benchmarks", "tests", "docker")
SUFFIXES = {".py", ".md", ".toml", ".yml", ".sh", ".txt"}


def _files():
    for top in WHERE:
        p = ROOT / top
        paths = [p] if p.is_file() else sorted(p.rglob("*"))
        for f in paths:
            if f.is_file() and f.suffix in SUFFIXES and "results" not in f.parts and "__pycache__" not in f.parts:
                yield f


def test_no_paper_or_issue_is_cited_by_number():
    bad = [f"{f.relative_to(ROOT)}:{n}: {m.group(0)}"
           for f in _files() for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1)
           for m in NUMBERED.finditer(line)]
    assert not bad, "cite by author and year (docs/references.md):\n" + "\n".join(bad[:40])


def test_every_cited_key_of_the_five_papers_is_in_the_references():
    refs = (ROOT / "docs" / "references.md").read_text()
    for key in ("Sudarsan & Ribbens 2007", "Nakazawa 2005", "Islam, Prodromidis & Squillante",
                "Figueira & Berman", "Lynch 1999"):
        assert key in refs
