"""Tooling for the book itself, not part of the installed ``roofline`` package: the Sphinx extension
that serves the vendored scripts (``vendor``), the chapter executor (``notebooks``) and the build
benchmarks (``bench``). Run from the repository root (``python -m booktools.bench``)."""
