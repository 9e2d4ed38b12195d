"""Every symbol a chapter writes in ``$...$`` is on the notation page (chapters/front/notation.md).

A symbol is a Latin or Greek letter with its subscript, if any (``P_\\text{peak}``, ``d_h``, ``C_i``) and
its star (``B^\\ast``); words set in math (``\\text{MFU}``), operators (``\\max``, ``\\sum``) and their bound
indices are not symbols. A chapter on :data:`CHECKED` fails when it uses a symbol the page does not list;
the page lists each symbol once, with the chapter that introduces it.

Every chapter, appendix and the rules page is on :data:`CHECKED`.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTATION = ROOT / "chapters" / "front" / "notation.md"
# the pages whose symbols the notation page covers (extend as the other chapters' symbols are listed)
CHECKED = ["01-three-budgets", "02-memory-budget", "03-recomputation", "04-tiling", "05-kv-cache",
           "06-quantization", "07-data-parallel", "08-tensor-parallel", "09-pipeline-parallel",
           "10-mixture-of-experts", "11-long-sequences", "12-serving", "13-serving-at-scale", "reference/rules", "appendix-measured",
           "appendix-calibrated", "appendix-cluster"]

GREEK = {"alpha", "beta", "gamma", "delta", "epsilon", "eta", "theta", "lambda", "mu", "nu", "rho", "sigma",
         "tau", "phi", "ell", "pi", "omega", "kappa", "chi", "psi", "xi", "zeta", "Delta", "Sigma", "Gamma",
         "Lambda", "Omega", "Phi", "Pi", "Theta"}
CONSTANTS = {"e"}  # Euler's number, in exponentials
MATH = re.compile(r"\$\$(.+?)\$\$|\$((?:[^$\n]|\n(?!\n))+?)\$", re.S)  # inline math may wrap a line
SUBSCRIPT = re.compile(r"_\{([A-Za-z][A-Za-z0-9,\-]*)\}|_([A-Za-z0-9])")


def symbols(tex: str) -> set[str]:
    """The symbols of one piece of TeX, e.g. ``'2NB/P_\\text{peak}'`` -> ``{'N', 'B', 'P_peak'}``."""
    tex = re.sub(r"(?<!_)\\text\{[^{}]*\}(?:_\\text\{[^{}]*\}|_\{[^{}]*\}|_[A-Za-z0-9])?", " ", tex)  # a word, with its subscript
    tex = re.sub(r"_\\text\{([^{}]*)\}", lambda m: "_{" + m.group(1).replace(" ", "") + "}", tex)
    tex = re.sub(r"\\(?:begin|end)\{[^{}]*\}", " ", tex)  # environment names are not symbols
    tex = tex.replace("^\\ast", "^*")
    tex = re.sub(r"\\(?:text|mathrm|operatorname|mathbf)\{[^{}]*\}", " ", tex)
    out, consumed = set(), []
    for m in re.finditer(r"\\([A-Za-z]+)|([A-Za-z])", tex):
        if any(a <= m.start() < b for a, b in consumed):
            continue
        if m.group(1):
            if m.group(1) not in GREEK:  # an operator (\max, \sum): its subscript is a bound index
                sub = re.match(r"_\{[^{}]*\}|_[A-Za-z0-9]", tex[m.end():])
                if sub:
                    consumed.append((m.end(), m.end() + sub.end()))
                continue
            base, end = "\\" + m.group(1), m.end()
        else:  # letters side by side are a product of symbols (words in math are \text{...}, removed above)
            base, end = m.group(2), m.end()
        sub = SUBSCRIPT.match(tex[end:])
        if sub:
            base += "_" + (sub.group(1) or sub.group(2))
            consumed.append((end, end + sub.end()))
            end += sub.end()
        if tex[end:].startswith("^*"):
            base += "*"
        if base not in CONSTANTS:
            out.add(base)
    return out


def page_math(path: Path):
    """The TeX of every ``$...$`` in the prose of a chapter: markdown cells the reader sees, code spans out."""
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "markdown" or "remove-cell" in cell.get("metadata", {}).get("tags", []):
            continue
        text = re.sub(r"```.*?```", "", "".join(cell["source"]), flags=re.S)
        text = re.sub(r"`[^`]*`", "", text)
        for m in MATH.finditer(text):
            yield m.group(1) or m.group(2)


def listed() -> set[str]:
    out = set()
    for m in MATH.finditer(NOTATION.read_text()):
        out |= symbols(m.group(1) or m.group(2))
    return out


def test_the_symbol_reader_finds_what_a_reader_would_call_a_symbol():
    assert symbols(r"2NB/P_\text{peak}") == {"N", "B", "P_peak"}
    assert symbols(r"B^\ast = \lceil I^\ast \rceil") == {"B*", "I*"}
    assert symbols(r"\max_j s_j + \sum_i C_i + e^{\mu}") == {"s_j", "C_i", "\\mu"}
    assert symbols(r"\text{MFU} = \frac{6 N D}{T \, G \, P_\text{peak}}") == {"N", "D", "T", "G", "P_peak"}
    assert symbols(r"d_h \ell") == {"d_h", "\\ell"}


@pytest.mark.parametrize("name", CHECKED)
def test_every_symbol_of_the_page_is_on_the_notation_page(name):
    missing = set()
    for tex in page_math(ROOT / "chapters" / f"{name}.ipynb"):
        missing |= symbols(tex) - listed()
    assert not missing, f"{name} uses symbols the notation page does not list: {sorted(missing)}"


def test_the_notation_page_names_the_chapter_that_introduces_each_symbol():
    rows = [line for line in NOTATION.read_text().splitlines() if line.startswith("| $")]
    assert rows
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert re.search(r"\b(\d+|A|B)\b", cells[-1]), f"no chapter in the last column of: {row}"


def test_every_page_of_the_book_is_checked():
    """A new chapter joins the check: every notebook under chapters/ is on CHECKED."""
    pages = {str(p.relative_to(ROOT / "chapters").with_suffix("")) for p in (ROOT / "chapters").rglob("*.ipynb")
             if ".ipynb_checkpoints" not in p.parts}
    assert pages <= set(CHECKED), sorted(pages - set(CHECKED))
