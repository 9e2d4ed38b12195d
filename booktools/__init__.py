"""Tooling for the book itself, not part of the installed ``roofline`` package: the Sphinx extension
that serves the vendored scripts (``vendor``), the chapter executor (``notebooks``) and the build
benchmarks (``bench``). Run from the repository root (``python -m booktools.bench``)."""

# numpy's code paths the book's kernels run without (NPY_DISABLE_CPU_FEATURES): its AVX-512 log, exp and
# power differ in the last bit from its other code, which moved pixels of the figures from one CPU to the
# next. The Makefile exports the same; tests/conftest.py sets it for a bare pytest.
NUMPY_PINNED = "X86_V4 AVX512_ICL AVX512_SPR"
