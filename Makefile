# Quick start on a fresh machine with Python 3.11+:  make book  |  make test
# Every target installs what it needs into .venv first (pinned by requirements.txt).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BOOK   := _build/html/index.html

# The same commit draws the same figures on every x86-64 machine, byte for byte. numpy picks its code for
# log, exp and power by the CPU it runs on, and its AVX-512 versions differ from the others in the last
# bit; on a log axis that moved the anti-aliased edges of 80 to 200 pixels of a PNG (figures/ch05-capacity,
# ch10-moe-decode, ch13-frontier), so a build on one machine changed the files another had committed.
# Every kernel these targets start (book, execute, lab, test) runs without those versions; tests/conftest.py
# sets the same for a bare pytest, and tests/book/test_figures.py builds figures twice and compares.
export NPY_DISABLE_CPU_FEATURES ?= X86_V4 AVX512_ICL AVX512_SPR

.PHONY: book pdf test check bench lab execute lock vendor clean

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11 or newer is needed, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

# The HTML book in _build/html; notebooks are executed during the build; any warning fails it. The build also
# writes the figure pack's index (booktools/figindex.py), copied to figures/README.md. STUDENT=1 then writes the
# student edition beside it, _build/student/html: the same site without the worked solutions.
book: $(STAMP)
	$(BIN)/jupyter-book build . --warningiserror --keep-going
	cp _build/figure-index.md figures/README.md
ifeq ($(STUDENT),1)
	$(BIN)/python -m booktools.student --site _build/html --out _build/student/html
	@echo "open _build/student/html/index.html"
else
	@echo "open _build/html/index.html"
endif

# The book printed to PDF by headless Chromium (the browser the tests use), booktools/pdf.py: _build/pdf/book.pdf
# (a title page, the contents, every page numbered on from the first, links inside it), api.pdf (the API
# reference) and one PDF per page of the book cut from book.pdf; STUDENT=1 prints the student edition into
# _build/student/pdf. URL=https://... names the web edition for this printing (default: _config.yml's
# html.baseurl). Builds the book first if it is not built.
PDF_FROM := $(if $(filter 1,$(STUDENT)),_build/student/html,_build/html)
PDF_TO   := $(if $(filter 1,$(STUDENT)),_build/student/pdf,_build/pdf)
pdf: $(STAMP)
	@test -f $(PDF_FROM)/index.html || $(MAKE) book STUDENT=$(STUDENT)
	$(BIN)/python -m booktools.pdf --site $(PDF_FROM) --out $(PDF_TO) $(if $(filter 1,$(STUDENT)),--student) $(if $(URL),--url $(URL))

# Every test: the package, the text's numbers, nbval on the committed notebooks, the book build.
test: $(STAMP)
	$(BIN)/python -m pytest

# The package's unit tests alone (tests/unit/, one folder per subpackage): the fast loop while working, on every
# core (pytest-xdist); `make bench` prints how long it takes (goal: under a minute on two cores).
CHECK := -m pytest -q -n auto -p no:cacheprovider tests/unit
check: $(STAMP)
	$(BIN)/python $(CHECK)

# Figures to quote: cold book build, nbval, one vectorized decode sweep.
bench: $(STAMP)
	$(BIN)/python -m booktools.bench

# The notebooks, live: sliders working, and the prose rendered by jupyterlab-myst (pinned in
# requirements.txt), which shows each number (an inline {eval}`name`) as the kernel computes it.
lab: $(STAMP)
	$(BIN)/jupyter lab chapters/

# Re-execute the chapters top to bottom in a fresh kernel and strip volatile metadata (commit after).
execute: $(STAMP)
	$(BIN)/python -m booktools.notebooks chapters/*.ipynb

lock:
	rm -rf /tmp/roofline-lock && $(PYTHON) -m venv /tmp/roofline-lock
	/tmp/roofline-lock/bin/pip install --quiet --upgrade pip
	/tmp/roofline-lock/bin/pip install --quiet -r requirements.in
	{ echo "# Pinned: every package the book and its tests install, from requirements.in (regenerate with \`make lock\`)."; \
	  /tmp/roofline-lock/bin/pip freeze; } > requirements.txt

# For maintainers: re-fetch the scripts the site serves itself (pinned in package-lock.json) into _vendor/
# with npm, and rewrite _vendor/MANIFEST.json; commit the result. Building the book needs no npm.
vendor: $(STAMP)
	$(BIN)/python -m booktools.vendor

clean:
	rm -rf _build .pytest_cache
