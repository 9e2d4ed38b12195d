"""Who may use the book and how to cite it: the licences, CITATION.cff, the changelog and the version,
said the same way in every place a reader meets them (the files, every page's footer, the introduction's
"How to cite", the PDF's title page)."""

import re
import tomllib
from pathlib import Path
from types import SimpleNamespace

import yaml

from booktools.edition import FOOTER_TEMPLATE, LICENSES, configure, edition

ROOT = Path(__file__).resolve().parents[2]


def test_one_version_and_date_in_citation_pyproject_and_changelog():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    version, released = str(cff["version"]), str(cff["date-released"])
    assert re.fullmatch(r"\d+\.\d+\.\d+", version) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", released)
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] == version
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)$", changelog, flags=re.M)
    assert releases and releases[0] == (version, released), "CHANGELOG.md's latest version is not CITATION.cff's"
    assert changelog.index("## Unreleased") < changelog.index(f"## {version}")
    assert cff["preferred-citation"]["edition"] == version


def test_citation_cff_has_what_the_format_requires():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors", "version", "date-released", "license", "type"):
        assert cff.get(key), key
    assert all(a.get("name") or a.get("family-names") for a in cff["authors"])
    assert set(cff["license"]) == set(LICENSES) == {"CC-BY-4.0", "MIT"}
    assert cff["preferred-citation"]["type"] == "book"


def test_the_licences_are_there_and_say_what_they_cover():
    code = (ROOT / "LICENSE").read_text(encoding="utf-8")
    content = (ROOT / "LICENSE-CONTENT").read_text(encoding="utf-8")
    assert "MIT License" in code and "Permission is hereby granted, free of charge" in code
    assert "roofline/" in code.split("Permission is hereby granted")[0]  # it says which files it covers
    assert "Creative Commons Attribution 4.0 International Public License" in content
    assert "Section 3 – License Conditions." in content  # the legal code itself, not a summary
    assert "figures/" in content.split("Creative Commons Attribution 4.0 International")[0]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]


def _config(url=""):
    return SimpleNamespace(version="", release="", myst_substitutions={"x": 1}, html_context={"default_mode": "auto"},
                           html_theme_options={"repository_url": url, "footer_content_items": None})


def test_a_repository_address_turns_the_repository_and_issue_buttons_on():
    book = edition(ROOT, commit="abc1234")
    quiet, loud = _config(), _config("https://github.com/example/three-budgets")
    configure(quiet, book)
    configure(loud, book)
    assert not quiet.html_theme_options.get("use_repository_button")
    assert not quiet.html_theme_options.get("use_issues_button")
    assert loud.html_theme_options["use_repository_button"] and loud.html_theme_options["use_issues_button"]
    for config in (quiet, loud):
        assert config.version == config.release == book.version
        assert FOOTER_TEMPLATE in config.html_theme_options["footer_content_items"]
        assert config.html_context == {"default_mode": "auto", "book_edition": book}
        assert config.myst_substitutions["x"] == 1 and config.myst_substitutions["book_version"] == book.version
    yaml_config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert "url" in yaml_config["repository"] and "baseurl" in yaml_config["html"]


def test_the_edition_reads_as_a_reader_writes_it():
    book = edition(ROOT, commit="abc1234")
    assert re.fullmatch(r"version \d+\.\d+\.\d+ of \d{1,2} [A-Z][a-z]+ \d{4} \(commit abc1234\)", book.stamp)
    assert book.bibtex.startswith("@book{three-budgets,") and f"edition = {{{book.version}}}" in book.bibtex
    assert edition(ROOT, commit=None).stamp.endswith(book.date)


def test_every_page_says_its_version_and_licences_and_the_introduction_how_to_cite(site):
    book = edition(ROOT, commit=None)
    pages = [p for p in site.rglob("*.html") if "_static" not in p.parts and p.name != "index.html"]
    assert len(pages) >= 27
    for page in pages:
        text = page.read_text(encoding="utf-8")
        footer = text[text.find('<p class="book-edition">'):]
        assert f"version {book.version} of {book.date}" in footer, page
        assert "creativecommons.org/licenses/by/4.0/" in footer and "opensource.org/license/mit" in footer, page
        link = re.search(r'href="([^"]*)#how-to-cite-and-reuse"', footer)
        assert link and (page.parent / (link.group(1) or page.name)).resolve() == (site / "intro.html").resolve(), page
    intro = (site / "intro.html").read_text(encoding="utf-8")
    assert 'id="how-to-cite-and-reuse"' in intro
    assert f"This is version {book.version} of the book, of {book.date}" in intro
    assert "@book" in intro and f"{{{book.version}}}" in intro
