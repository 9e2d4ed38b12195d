"""Which book this is: its version, date, licences and addresses, said the same way everywhere.

``CITATION.cff`` is the one place that holds the book's version and release date (``pyproject.toml``'s
version and ``CHANGELOG.md``'s latest entry repeat them; tests/book/test_edition.py keeps the three the
same). :func:`edition` reads it, with the commit the book is built from (when it is built from a git
checkout) and the two addresses ``_config.yml`` may set: ``html.baseurl``, where the web edition is
served, and ``repository.url``, where its source is.

As a Sphinx extension (``sphinx: local_extensions`` in ``_config.yml``), at ``config-inited``:

- Sphinx's ``version`` and ``release`` are the book's version;
- the footer of every page gains a line with the version, its date and the commit, the licences and a
  link to "How to cite" (``_templates/book-edition.html``, after the theme's author and copyright);
- the pages' MyST substitutions gain ``book_version``, ``book_date``, ``book_citation`` and
  ``book_bibtex`` (the introduction's "How to cite" uses them);
- with a repository address configured, the theme's repository and issue buttons are turned on (Jupyter
  Book refuses them without one, so ``_config.yml`` cannot ask for them while the address is empty).

``booktools.pdf`` prints the same on the PDF's title page.
"""

from __future__ import annotations

import datetime as _dt
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
LICENSES = {  # SPDX identifier: (what it covers, its name, where it is explained)
    "CC-BY-4.0": ("text and figures", "CC BY 4.0", "https://creativecommons.org/licenses/by/4.0/"),
    "MIT": ("code", "MIT", "https://opensource.org/license/mit"),
}
FOOTER_TEMPLATE = "book-edition.html"


@dataclass(frozen=True)
class Edition:
    title: str  # the book's title as CITATION.cff gives it (with its subtitle)
    short_title: str  # the title the site shows (_config.yml's title)
    version: str
    released: _dt.date
    authors: str
    licenses: tuple[str, ...]  # SPDX identifiers
    commit: str | None  # the short hash of the commit built from, when there is a git checkout
    url: str  # where the web edition is served (html.baseurl), "" when not configured
    repository: str  # the source's address (repository.url), "" when not configured

    @property
    def date(self) -> str:
        """The release date as a reader writes it: '6 December 2026'."""
        return f"{self.released.day} {self.released:%B %Y}"

    @property
    def stamp(self) -> str:
        """'version 0.1.0 of 6 December 2026 (commit 1a2b3c4)'."""
        built = f" (commit {self.commit})" if self.commit else ""
        return f"version {self.version} of {self.date}{built}"

    @property
    def citation(self) -> str:
        """One line, as a reference list prints it."""
        where = f" {self.url}" if self.url else ""
        return f"{self.authors}. *{self.title}*. Version {self.version}, {self.released.year}.{where}"

    @property
    def bibtex(self) -> str:
        fields = [("title", "{" + self.title + "}"), ("author", "{{" + self.authors + "}}"),
                  ("year", str(self.released.year)), ("edition", "{" + self.version + "}")]
        if self.url:
            fields.append(("url", "{" + self.url + "}"))
        body = ",\n".join(f"  {key:<7} = {value}" for key, value in fields)
        return "@book{three-budgets,\n" + body + "\n}"

    def license_lines(self) -> list[tuple[str, str, str]]:
        """(what it covers, licence name, its address) for each licence, in CITATION.cff's order."""
        return [LICENSES[spdx] for spdx in self.licenses if spdx in LICENSES]


def git_commit(root: Path = ROOT) -> str | None:
    """The short hash of the checked-out commit, or None outside a git checkout (a source archive)."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def edition(root: Path = ROOT, *, commit: str | None | bool = True) -> Edition:
    """The book's edition, from ``CITATION.cff`` and ``_config.yml`` under ``root``; ``commit=True`` asks
    git for it, a string or None gives it."""
    cff = yaml.safe_load((root / "CITATION.cff").read_text(encoding="utf-8"))
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    released = cff["date-released"]
    if isinstance(released, str):
        released = _dt.date.fromisoformat(released)
    licenses = cff.get("license", [])
    return Edition(
        title=cff["title"],
        short_title=config.get("title", cff["title"]),
        version=str(cff["version"]),
        released=released,
        authors=" and ".join(a.get("name") or f"{a.get('given-names', '')} {a.get('family-names', '')}".strip()
                             for a in cff["authors"]),
        licenses=tuple([licenses] if isinstance(licenses, str) else licenses),
        commit=git_commit(root) if commit is True else (commit or None),
        url=((config.get("html") or {}).get("baseurl") or "").strip(),
        repository=((config.get("repository") or {}).get("url") or "").strip(),
    )


# --- the Sphinx extension ---------------------------------------------------------------------------

def configure(config, book: Edition) -> None:
    """Set, on a Sphinx ``config``, what the module's docstring lists."""
    config.version = config.release = book.version
    config.myst_substitutions = {
        **(config.myst_substitutions or {}),
        "book_version": book.version,
        "book_date": book.date,
        "book_citation": book.citation,
        "book_bibtex": f"```bibtex\n{book.bibtex}\n```",
    }
    options = dict(config.html_theme_options or {})
    items = list(options.get("footer_content_items") or
                 ["author.html", "copyright.html", "last-updated.html", "extra-footer.html"])
    if FOOTER_TEMPLATE not in items:
        items.insert(2, FOOTER_TEMPLATE)
    options["footer_content_items"] = items
    if (options.get("repository_url") or "").strip():
        options["use_repository_button"] = options["use_issues_button"] = True
    config.html_theme_options = options
    config.html_context = {**(config.html_context or {}), "book_edition": book}


def _config_inited(app, config) -> None:
    configure(config, edition(Path(app.srcdir)))


def setup(app):
    app.connect("config-inited", _config_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
