# One-command set-up on a fresh machine with Python 3.11 and pip:
#   make test   -- install everything, run posenc's tests (Keras on TensorFlow, JAX and PyTorch), then
#                  execute every notebook once by building the book from a clean _build (a cell that
#                  raises fails the build); the site it leaves in _build/html is what CI checks
#   make book   -- install everything, execute the notebooks (cached in _build/.jupyter_cache), write the static site to _build/html
#   make test-site -- check the built site, in headless Chromium too (tests/test_browser.py)
#   make nbval NOTEBOOKS=notebooks/12_debugging.ipynb -- run Colab's .ipynb copies under nbval (a quick check of one)
#   make test-newest -- the tests that compare with Hugging Face transformers, and the chapters that import
#                  it, against transformers' newest release, in a second environment (.venv-newest)
# Uses the active virtual environment if there is one, else creates .venv here.

PYTHON ?= python3
ENV := $(if $(VIRTUAL_ENV),$(VIRTUAL_ENV),$(CURDIR)/.venv)
PY := $(ENV)/bin/python
STAMP := $(ENV)/.posenc-installed
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONHASHSEED ?= 0
# Chapters executed at a time (scripts/execute_notebooks.py) and pytest workers (pytest-xdist)
JOBS ?= 2

.PHONY: install test test-package test-notebooks nbval book test-site ipynb bench clean test-newest

$(PY):
	$(PYTHON) -m venv $(ENV)

$(STAMP): requirements.txt requirements-reference.txt pyproject.toml | $(PY)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -r requirements.txt -r requirements-reference.txt
	$(PY) -m pip install --no-deps timm==1.0.31  # see requirements-reference.txt
	$(PY) -m pip install --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

test: test-package test-notebooks

# The whole suite with Keras on TensorFlow, then the tests that use the Keras face (marker `keras`,
# explicit: tests/conftest.py) again on JAX and on PyTorch, except those whose result cannot depend
# on the backend (marker `backend_free`); each spread over $(JOBS) processes (pytest-xdist), with
# the slowest tests' durations in the log.
BACKEND_PASS := -m "keras and not backend_free"
DURATIONS ?= --durations=15 --durations-min=5
test-package: install
	$(PY) -m pytest tests -n $(JOBS) $(DURATIONS)
	KERAS_BACKEND=jax $(PY) -m pytest tests $(BACKEND_PASS) -n $(JOBS) $(DURATIONS)
	KERAS_BACKEND=torch $(PY) -m pytest tests $(BACKEND_PASS) -n $(JOBS) $(DURATIONS)

# Every notebook executed once, from scratch: the book is built from a clean _build (no cached
# outputs), execution errors are fatal (`allow_errors: false` in _config.yml; with -W the failed
# execution's warning fails the build, --keep-going reports every failing notebook first).
test-notebooks: install
	rm -rf _build
	$(PY) scripts/execute_notebooks.py --jobs $(JOBS)
	$(ENV)/bin/jupyter-book build . -W --keep-going
	@echo "Every notebook ran; the site is in _build/html/index.html"

# Colab's .ipynb copies (cell for cell the .md sources, tests/test_notebooks.py) under nbval:
# a quick check of one notebook without building the book. Not part of `make test`.
NOTEBOOKS ?= notebooks
nbval: install
	$(PY) -m pytest --nbval-lax --nbval-cell-timeout=600 $(NOTEBOOKS)

# Notebooks run once and their outputs are cached: a rebuild re-executes only notebooks whose code
# changed. The cache does not see changes to posenc: `make clean book` re-executes everything.
book: install
	$(PY) scripts/execute_notebooks.py --jobs $(JOBS)
	$(ENV)/bin/jupyter-book build . -W --keep-going
	@echo "The site is in _build/html/index.html"

# The built site: static checks, then every page offline in headless Chromium (Debian's chromium
# when installed, else Playwright's own: `$(ENV)/bin/playwright install chromium`).
# Screenshots go to _build/screenshots/.
test-site: install
	POSENC_SITE=_build/html $(PY) -m pytest -rs tests/test_site.py tests/test_browser.py

# Regenerate each notebooks/*.ipynb from its MyST-markdown source (cell ids kept, no outputs).
ipynb: install
	$(PY) scripts/sync_notebooks.py

# Speed checks (not part of the tests); add ARGS="--device cuda" on a GPU.
bench: install
	$(PY) benchmarks/bench_sinusoidal.py $(ARGS)
	$(PY) benchmarks/bench_bias.py $(ARGS)
	$(PY) benchmarks/bench_shaw.py $(ARGS)
	$(PY) benchmarks/bench_rotary.py $(ARGS)
	$(PY) benchmarks/bench_flex.py $(ARGS)

# The pins stay in requirements-reference.txt; this checks that the tests comparing with Hugging
# Face transformers and the chapters importing it also pass on its newest release. A second
# environment, .venv-newest, gets everything pinned, then transformers upgraded (torch held at its
# pin: an upgrade that needs another torch fails here); the chapters run with
# scripts/run_chapters.py, which stores nothing in the book's cache.
NEWEST := $(CURDIR)/.venv-newest
NEWEST_PY := $(NEWEST)/bin/python
NEWEST_STAMP := $(NEWEST)/.posenc-installed

$(NEWEST_STAMP): requirements.txt requirements-reference.txt pyproject.toml
	$(PYTHON) -m venv $(NEWEST)
	$(NEWEST_PY) -m pip install --upgrade pip
	$(NEWEST_PY) -m pip install -r requirements.txt -r requirements-reference.txt
	$(NEWEST_PY) -m pip install --no-deps timm==1.0.31  # see requirements-reference.txt
	$(NEWEST_PY) -m pip install --no-deps -e .
	touch $(NEWEST_STAMP)

test-newest: $(NEWEST_STAMP)
	grep -o '^torch==[^ ]*' requirements.txt > $(NEWEST)/constraints.txt
	$(NEWEST_PY) -m pip install --upgrade transformers -c $(NEWEST)/constraints.txt
	@echo "transformers $$($(NEWEST_PY) -c 'import transformers; print(transformers.__version__)')" \
	      "(pinned: $$(grep -o '^transformers==[^ ]*' requirements-reference.txt))"
	$(NEWEST_PY) -m pytest tests -m reference -n $(JOBS)
	$(NEWEST_PY) scripts/run_chapters.py --importing transformers
	@echo "Passed on transformers $$($(NEWEST_PY) -c 'import transformers; print(transformers.__version__)')"

clean:
	rm -rf _build .pytest_cache
