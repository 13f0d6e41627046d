# One entry point for people and CI. Everything runs from a project-local virtualenv
# that `make` builds from pyproject.toml, so a fresh machine needs only python3 and make.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv test lint browser run bench bench-http bench-queue clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -c 'from cranfield.json_body import warm_up; warm_up()'  # numba's cache
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check cranfield service tests bench

# The report page's browser test drives Debian's Chromium (tests/browser): installed here when
# missing, as root or through sudo; without it those tests skip, or fail under CI=true.
CHROMIUM := /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  echo "installing chromium for the report page's browser test"; \
	  $$SUDO apt-get install -y -q chromium >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null 2>&1 && $$SUDO apt-get install -y -q chromium >/dev/null; } || \
	  echo "could not install chromium: the browser tests will skip (fail with CI=true)"; }

test: $(STAMP) lint browser
	$(BIN)/python -m pytest -q

run: $(STAMP)
	$(BIN)/cranfield serve --host 127.0.0.1 --port 8000

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/engine.py

bench-http: $(STAMP)
	$(BIN)/python bench/http.py

bench-queue: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/datagen.py --scales M
	$(BIN)/python bench/queue.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
