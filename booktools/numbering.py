"""Chapter numbers where the prose expects them: appendices numbered by letter ("A. The roofline meets a
real GPU", its figures "Fig. A.1"), and every numbered page's printed title carrying its number.

The table of contents numbers the chapters (``numbered: 1`` on their parts in ``_toc.yml``, continued across
parts by sphinx-multitoc-numbering), so that a page's title, the sidebar and the PDF say "7. Buying memory
with network traffic" where the prose says "chapter 7". The Appendices part is numbered too, and this
extension then gives each of its documents a letter in place of the number the count reached (14 becomes
A, 15 B, ...): in the document's title, in the sidebar and the previous/next links (the ``secnumber`` Sphinx
keeps on the table of contents' nodes), in its sections' numbers, and in its figures' and tables' numbers.
An appendix is a document whose name starts with ``appendix-`` (``chapters/appendix-measured``), lettered
in the order the table of contents numbers them.

It runs on ``env-get-updated`` after Sphinx's own table-of-contents collector has assigned the numbers
(priority 900, the collector's is the default 500), and so again on every build.

The theme prints a page (``make pdf``) under a heading of its own, the page's plain title (``pagetitle``),
in place of the article's numbered one; :func:`number_pagetitle` gives that heading the number too, so that
a printed chapter says "7. Buying memory with network traffic" as its page, sidebar and bookmark do.
"""

from __future__ import annotations

import string
from pathlib import PurePosixPath

from docutils import nodes

PREFIX = "appendix-"


def appendices(env) -> list[str]:
    """The numbered appendices, in the order of their numbers (or of their letters, where a build that did not
    number them again kept the letters of the last one)."""
    found = [(isinstance(numbers[""][0], str), numbers[""][0], doc) for doc, numbers in env.toc_secnumbers.items()
             if PurePosixPath(doc).name.startswith(PREFIX) and numbers.get("")]
    return [doc for _, _, doc in sorted(found)]


def _lettered(number, letter):
    """``number`` (a tuple or list of section numbers, or None) with its first element replaced by ``letter``."""
    if not number:
        return number
    return type(number)([letter, *number[1:]])


def letter_appendices(app, env) -> list[str]:
    docs = appendices(env)
    if len(docs) > len(string.ascii_uppercase):
        raise ValueError(f"{len(docs)} appendices, more than there are letters")
    for doc, letter in zip(docs, string.ascii_uppercase):
        env.toc_secnumbers[doc] = {anchor: _lettered(n, letter) for anchor, n in env.toc_secnumbers[doc].items()}
        for reference in env.tocs[doc].findall(nodes.reference):
            if "secnumber" in reference:
                reference["secnumber"] = _lettered(reference["secnumber"], letter)
        title = env.titles.get(doc)
        if title is not None and "secnumber" in title:
            title["secnumber"] = _lettered(title["secnumber"], letter)
        for kind, numbers in env.toc_fignumbers.get(doc, {}).items():
            env.toc_fignumbers[doc][kind] = {key: _lettered(n, letter) for key, n in numbers.items()}
    return docs


def secnumber(env, docname: str) -> str:
    """A document's own number as the pages print it ("7.", "A."), or '' outside the numbered parts."""
    number = env.toc_secnumbers.get(docname, {}).get("")
    return ".".join(map(str, number)) + "." if number else ""


def number_pagetitle(app, pagename, templatename, context, doctree) -> None:
    number = secnumber(app.env, pagename)
    if number and context.get("pagetitle") and not context["pagetitle"].startswith(number):
        context["pagetitle"] = f"{number} {context['pagetitle']}"


def setup(app):
    app.connect("env-get-updated", letter_appendices, priority=900)
    app.connect("html-page-context", number_pagetitle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
