# labmem — one command to set up and open the lessons, one to set up and test everything.
#   make lab        create .venv if needed, install what the chapters run (the lab extra: about a
#                   third of everything), open JupyterLab on the repository at the start page
#                   (LAB_ARGS adds flags; the default adds --allow-root when run as root)
#   make test       create .venv if needed, install everything (the dev extra: lab, the test
#                   tools and browser driver, the site builder, the benchmark peers, ruff),
#                   run unit tests + strict nbval
#   make notebooks  write labmem/scratch from the chapters, re-execute every chapter and solution
#                   notebook in place, then the slide notes and the start page's measured times
#   make scratch    write labmem/scratch/*.py again from the chapters' '# scratch: <module>' cells
#   make zh         the Chinese edition: re-extract every message into locale/zh_CN (changed
#                   English turns fuzzy), compile the runtime catalogue and its font, then
#                   rebuild and run notebooks/zh and solutions/zh where a source changed
#   make html       build the course website (build/index.html) from the committed notebooks,
#                   and its Chinese edition (build/zh/index.html), each page linking to the other
#   make slides     export every chapter to an offline reveal.js deck under build/slides/
#                   (the Chinese chapters' decks under build/slides/zh/)
#   make slide-metadata  (re)write every chapter's slide metadata with tools/slides.py
#   make bench      run the benchmarks in bench/ (not part of the tests)
#   make lock       re-pin constraints.txt after changing pyproject.toml (every extra)
#   make install-lab / make install   only install: the lab extra / everything (dev)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check --no-input
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))
SOLUTIONS := $(sort $(wildcard solutions/*.ipynb))
ZH_NOTEBOOKS := $(sort $(wildcard notebooks/zh/*.ipynb))
# JupyterLab refuses to start as root without --allow-root (containers run as root).
LAB_ARGS ?= $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root,)
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings
# reveal.js for the offline decks, from the npm package pinned in tools/reveal/package-lock.json
REVEAL := tools/reveal/node_modules/reveal.js/dist/reveal.js

.PHONY: install install-lab lab test scratch notebooks zh html slides slide-metadata bench lock lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# One stamp per install, so each target installs what it needs and no more: the lab extra for
# `make lab` (and the decks: JupyterLab brings nbconvert), dev (every extra) for the tests and
# `make notebooks`, docs for `make html`, bench for `make bench`; all pinned by constraints.txt.
# The lab and dev installs also register the kernel every notebook names and the lab's
# settings (no news prompt).
LAB_STAMP   := $(VENV)/.labmem-lab
DEV_STAMP   := $(VENV)/.labmem-dev
DOCS_STAMP  := $(VENV)/.labmem-docs
BENCH_STAMP := $(VENV)/.labmem-bench

$(LAB_STAMP) $(DEV_STAMP): $(VENV)/.labmem-%: pyproject.toml constraints.txt tools/jupyterlab/overrides.json | $(BIN)/python
	$(PIP) install -q -c constraints.txt -e '.[$*]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (labmem)" >/dev/null
	mkdir -p $(LAB_SETTINGS) && cp tools/jupyterlab/overrides.json $(LAB_SETTINGS)/overrides.json
	touch $@

$(DOCS_STAMP) $(BENCH_STAMP): $(VENV)/.labmem-%: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) install -q -c constraints.txt -e '.[$*]'
	touch $@

$(REVEAL): tools/reveal/package.json tools/reveal/package-lock.json
	npm ci --prefix tools/reveal --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $(REVEAL)

install-lab: $(LAB_STAMP)

install: $(DEV_STAMP)

# tools/lab.py serves the repository root (notebooks/, solutions/, data/, README.md), opens
# the start page and prints one line to click: the start page's URL with the server's token
lab: install-lab
	$(BIN)/python tools/lab.py $(LAB_ARGS)

# the site and deck tests (tests/site/) build what they open; reveal.js must be installed
test: install $(REVEAL)
	$(BIN)/python -m pytest

# the from-scratch modules come from the chapters first (the chapters import them); the slide
# notes quote outputs, so they are written again after the run; then the start page's times
notebooks: install
	$(BIN)/python tools/scratch.py
	$(BIN)/python tools/slides.py $(NOTEBOOKS)
	cd notebooks && for nb in $(notdir $(NOTEBOOKS)); do \
	  ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.kernel_name=python3 --ExecutePreprocessor.timeout=300 \
	    --ExecutePreprocessor.record_timing=False $$nb || exit 1; \
	done
	cd solutions && for nb in $(notdir $(SOLUTIONS)); do \
	  ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.kernel_name=python3 --ExecutePreprocessor.timeout=300 \
	    --ExecutePreprocessor.record_timing=False $$nb || exit 1; \
	done
	$(BIN)/python tools/slides.py $(NOTEBOOKS)
	$(BIN)/python tools/reading_time.py --write

# after `make notebooks` (or any edit of an English chapter): catalogues, then the Chinese pages
zh: install
	$(BIN)/python tools/i18n.py update
	$(BIN)/python tools/i18n.py build

html: $(DOCS_STAMP)
	$(BIN)/python tools/build_site.py --out build

slides: install-lab $(REVEAL)
	$(BIN)/python tools/build_decks.py --out build/slides $(NOTEBOOKS) $(ZH_NOTEBOOKS)

slide-metadata: install-lab
	$(BIN)/python tools/slides.py $(NOTEBOOKS)

bench: $(BENCH_STAMP)
	for b in bench/*.py; do case $$b in */benchlib.py) ;; *) $(BIN)/python $$b || exit 1;; esac; done

# dev is every extra (lab, online, mcp, test, docs, bench and ruff)
lock: | $(BIN)/python
	$(PIP) install -q -e '.[dev]'
	( echo "# Pinned versions for make/CI: regenerate with 'make lock' after changing pyproject.toml."; \
	  $(PIP) freeze --exclude-editable ) > constraints.txt

lint: install
	$(BIN)/ruff check labmem tests bench

clean:
	rm -rf build .pytest_cache

# The from-scratch modules are the chapters' marked cells; a test fails when they differ.
scratch: $(BIN)/python
	$(BIN)/python tools/scratch.py
