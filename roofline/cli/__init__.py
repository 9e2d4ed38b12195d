"""The ``roofline`` command line: quick numbers without opening the book (reference: the CLI page).

A thin layer over the package: :mod:`~roofline.cli.parser` (the flags), :mod:`~roofline.cli.main`
(dispatch), :mod:`~roofline.cli.output` (text, JSON, errors), and one module per command group, each
command a few lines over one package function: :mod:`~roofline.cli.catalog`,
:mod:`~roofline.cli.inference`, :mod:`~roofline.cli.serving` (with :mod:`~roofline.cli.deployment`, the workload
question of chapter 13), :mod:`~roofline.cli.training` and :mod:`~roofline.cli.rules`.
"""

from roofline.cli.main import main
from roofline.cli.parser import build_parser

__all__ = ["main", "build_parser"]
