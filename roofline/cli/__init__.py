"""The ``roofline`` command line: quick numbers without opening the book (reference: the CLI page)."""

from roofline.cli.app import build_parser, main

__all__ = ["main", "build_parser"]
