"""Presentation: what the book shows. Formulas live below; these rooms call, format and draw.

- :mod:`~roofline.present.glue`: numbers into the prose (``glue``, ``glue_text``).
- :mod:`~roofline.present.tables`: rows of formatted text, shown as HTML in a page.
- :mod:`~roofline.present.plot`: the book's figures (matplotlib), and where they are saved.
- :mod:`~roofline.present.frames`: the mechanism behind every explorer: pre-rendered frames, linked in the browser.
- :mod:`~roofline.present.widgets`: the explorers themselves, one per chapter (ipywidgets).

Only here (and above) are matplotlib and ipywidgets imported; ``import roofline`` needs numpy alone.
"""
