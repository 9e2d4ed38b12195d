"""What a reader sees on the built chapter pages: our own words, and no machinery.

Both checks read the HTML the book build writes (the ``site`` fixture builds it once per run), because
that is where glued numbers become words: a notebook's source holds ``{eval}`name```, the page
holds '16.1 GB', and a sentence copied from the source text can only be seen in the page.
"""

from __future__ import annotations

import html
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _seed_dir() -> Path:
    """The seed text lives beside the repository (../shared/seed/), not inside it: the book may not ship
    it. In a git worktree checked out elsewhere, ../shared is looked for beside the main checkout too."""
    here = ROOT.parent / "shared" / "seed"
    if here.is_dir():
        return here
    try:
        common = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--path-format=absolute", "--git-common-dir"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return here
    main = Path(common).parent if common else None
    return main.parent / "shared" / "seed" if main and (main.parent / "shared" / "seed").is_dir() else here


SEED = _seed_dir()
RUN = 9  # words in a row that the prose may never share with the seed


def words(text: str) -> list[str]:
    """Lower-case runs of letters and digits: '16.06 GB' -> ['16', '06', 'gb']."""
    return re.findall(r"[a-z0-9]+", text.lower())


def page_text(page: Path) -> str:
    """The visible text of a built page: the article only (not the navigation), no scripts or styles."""
    raw = page.read_text(encoding="utf-8")
    main = re.search(r"<main\b.*?</main>", raw, flags=re.S)
    raw = main.group(0) if main else raw
    raw = re.sub(r"<(script|style)\b[^>]*>.*?</\1>", " ", raw, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", raw))


def shared_runs(text: str, seed_grams: set[tuple[str, ...]], n: int = RUN) -> list[str]:
    w = words(text)
    return [" ".join(w[i:i + n]) for i in range(len(w) - n + 1) if tuple(w[i:i + n]) in seed_grams]


def grams(text: str, n: int = RUN) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def test_the_run_finder_finds_a_run_and_only_a_run():
    seed = grams("one two three four five six seven eight nine ten")
    assert shared_runs("zero one two three four five six seven eight nine", seed) == [
        "one two three four five six seven eight nine"]
    assert shared_runs("one two three four five six seven eight ten nine", seed) == []


def chapter_pages(site: Path) -> list[Path]:
    pages = sorted(p for p in (site / "chapters").glob("*.html"))
    assert pages, f"no chapter pages under {site / 'chapters'}"
    return pages


def test_no_built_page_repeats_nine_words_of_the_seed(site):
    if not SEED.is_dir() or not list(SEED.glob("*.txt")):
        pytest.skip(f"the seed text is not here ({SEED} has no *.txt); this check needs ../shared/seed/ "
                    "beside the repository")
    seed = set().union(*(grams(p.read_text(encoding="utf-8")) for p in SEED.glob("*.txt")))
    # The bibliography quotes the titles of the works it lists, and the seed cites one of them (Williams
    # et al.'s nine-word title) by name: a title is a quotation, not prose, so that page is left out.
    pages = [p for p in (*sorted((site / "chapters").rglob("*.html")), *site.glob("*.html"))
             if p.name != "bibliography.html"]
    found = {p.relative_to(site).as_posix(): shared_runs(page_text(p), seed) for p in pages}
    found = {k: v for k, v in found.items() if v}
    assert not found, "built pages repeat the seed word for word: " + "; ".join(
        f"{k}: '{v[0]} ...'" for k, v in found.items())


# Machinery a reader must never see: a glue call, a numpy array's repr, a bare repr of an object.
MACHINERY = {
    "a glue() call": re.compile(r"\bglue(_text)?\("),
    "a numpy array repr": re.compile(r"\barray\("),
    "an object repr": re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>|\b[A-Z]\w+\((\w+=)"),
    "a memory address": re.compile(r"0x[0-9a-f]{8,}"),
    "a log line": re.compile(r"^\s*(INFO|DEBUG|WARNING)\b[: |]", flags=re.M),
}


def test_the_machinery_patterns_catch_what_they_name():
    assert MACHINERY["a glue() call"].search('glue("x", 1)')
    assert MACHINERY["a numpy array repr"].search("array([1.00000e+00, 2.0])")
    assert MACHINERY["an object repr"].search("Breakdown(parts={'weights': ...})")
    assert MACHINERY["an object repr"].search("<roofline.present.tables.Table object at 0x7f00deadbeef>")
    assert not any(p.search("the weights are read once per step, 4.79 ms") for p in MACHINERY.values())


def test_no_chapter_page_shows_machinery(site):
    problems = []
    for page in chapter_pages(site):
        if page.parent.name == "reference":
            continue
        text = page_text(page)
        for what, pattern in MACHINERY.items():
            m = pattern.search(text)
            if m:
                problems.append(f"{page.name}: {what}: ...{text[max(0, m.start() - 60):m.end() + 60]!r}...")
    assert not problems, "\n".join(problems)


# --- the bibliography: every source the catalog cites, each findable ---------------------------------


def _bib_entries() -> dict[str, str]:
    text = (ROOT / "references.bib").read_text(encoding="utf-8")
    entries = {}
    for m in re.finditer(r"@\w+\{([^,\s]+),(.*?)\n\}", text, flags=re.S):
        entries[m.group(1)] = m.group(2)
    return entries


def test_every_catalog_source_is_in_the_bibliography_with_an_address():
    import tomllib

    from roofline.core import hardware

    entries = _bib_entries()
    assert len(entries) >= 10
    catalog = tomllib.loads((Path(hardware.__file__).parents[1] / "data" / "hardware.toml").read_text(encoding="utf-8"))
    missing = sorted(set(catalog["sources"]) - set(entries))
    assert not missing, f"catalog sources without a bibliography entry: {missing}"
    for key, body in entries.items():
        shipped = re.search(r"howpublished\s*=\s*\{([^,}]+)", body)
        if shipped:  # a file shipped with the package, not on the web
            assert (ROOT / shipped.group(1).strip()).is_file(), f"{key}: {shipped.group(1)} is not in the repository"
            continue
        assert re.search(r"\b(doi|url)\s*=\s*\{\S+\}", body), f"{key} has neither a DOI nor a URL"


def test_every_cited_key_is_in_the_bibliography():
    entries = _bib_entries()
    cited = set()
    for path in (ROOT / "chapters").rglob("*"):
        if path.suffix in {".ipynb", ".md"}:
            for group in re.findall(r"\{cite\}`([^`]+)`", path.read_text(encoding="utf-8")):
                cited |= {k.strip() for k in group.split(",")}
    assert cited, "no {cite} in the chapters"
    assert not cited - set(entries), f"cited but not in references.bib: {sorted(cited - set(entries))}"
