# One entry point for people and CI. Everything runs from a project-local virtualenv
# that `make` builds from pyproject.toml, so a fresh machine needs only python3 and make.
#   make run                 serve the API: installs only what serving needs (`pip install -e .`)
#   make run PORT=8001       another port; CRANFIELD_BIND=HOST:PORT make run another address
#                            (the service's address setting, as gunicorn reads it; PORT wins)
#   make test                lint and every test: installs the test tools as well (`.[test]`,
#                            and tests/package.json's with npm ci), never a system package
#   make system-deps         the system packages some tests need (Chromium; nginx unpacked
#                            into .venv), saying what and why; .ci/run runs it before make test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# two stamps: what serving needs, and that plus the test tools (every target but run)
RUN_STAMP := $(VENV)/.installed-run
STAMP  := $(VENV)/.installed
PORT   ?=

.PHONY: venv test lint system-deps browser proxy run bench bench-http bench-queue mutation clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# -c constraints.txt: every package at the version it pins (the versions the tests passed
# with; the Docker image installs from the same file), whatever has been released since.
# --no-compile: pip byte-compiles every module of every wheel (scipy, pyarrow, pandas…: about
# half of the install's CPU time); Python compiles just what serving imports, on first import.
# (Where PYTHONDONTWRITEBYTECODE is set, every start compiles what it imports: ~3 s of CPU.)
$(RUN_STAMP): pyproject.toml constraints.txt cranfield/inputs/_mapscan.c cranfield/inputs/_jsonscan.c cranfield/inputs/_rankpass.c cranfield/inputs/_textpass.c cranfield/inputs/_seeded_mix.h cranfield/inputs/_mapping_values.h | $(BIN)/python
	$(BIN)/python -m pip install --quiet --no-compile -c constraints.txt -e .
	touch $(RUN_STAMP)

# The install compiles the C extension (cranfield/inputs/_mapscan.c and _jsonscan.c: the engine's one
# compiled accelerator) where a C compiler is found; warm_up() then says whether it loaded
# (nothing is compiled at run time). Without a compiler the install goes on and the engine
# takes its Python paths: same answers, slower (the tests of those paths say which ran).
$(STAMP): pyproject.toml constraints.txt cranfield/inputs/_mapscan.c cranfield/inputs/_jsonscan.c cranfield/inputs/_rankpass.c cranfield/inputs/_textpass.c cranfield/inputs/_seeded_mix.h cranfield/inputs/_mapping_values.h | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	@$(BIN)/python -c 'from cranfield.inputs.json_body import warm_up; print("compiled accelerator (cranfield.inputs._mapscan):", "loaded" if warm_up() else "not built (no C compiler): the Python paths")'
	touch $(STAMP) $(RUN_STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check cranfield backend service worker tests bench

# System packages some tests need, installed only by this explicit step (`make test` installs
# none; .ci/run runs `make system-deps` first). It says what it installs and why, and fails if
# it cannot; without them those tests skip, or fail under CI=true.
#   chromium  the report pages' browser tests (tests/browser, tests/integration/
#             test_nightly_story.py): Debian's package, apt-get install as root or through sudo
#   nginx     the slow-client test (tests/integration/test_slow_clients.py: the recommended
#             deployment puts nginx in front of gunicorn, deploy/nginx.conf.template). One on
#             PATH is used; else Debian's package is unpacked into the virtualenv (dpkg -x:
#             nothing installed system-wide, no service started, no root needed but for a
#             first apt-get update)
system-deps: browser proxy

CHROMIUM := /usr/bin/chromium
browser:
	@echo "system-deps: chromium ($(CHROMIUM)), for the report pages' browser tests (tests/browser, test_nightly_story)"
	@if test -x $(CHROMIUM); then echo "  already installed"; else \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  echo "  installing Debian's chromium: $${SUDO:+sudo }apt-get install -y chromium"; \
	  $$SUDO apt-get install -y -q chromium >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q chromium >/dev/null; } && \
	  test -x $(CHROMIUM) || \
	  { echo "  could not install chromium: the browser tests will skip (fail with CI=true)"; exit 1; }; fi

NGINX := $(VENV)/nginx/usr/sbin/nginx
proxy:
	@echo "system-deps: nginx, for the slow-client test (tests/integration/test_slow_clients.py)"
	@if command -v nginx >/dev/null; then echo "  on PATH: $$(command -v nginx)"; \
	elif test -x $(NGINX); then echo "  already unpacked: $(NGINX)"; else \
	  echo "  unpacking Debian's nginx into $(VENV)/nginx (apt-get download; dpkg -x)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); tmp=$$(mktemp -d); \
	  ( cd $$tmp && { apt-get download -q nginx >/dev/null 2>&1 || \
	    { $$SUDO apt-get update -q >/dev/null && apt-get download -q nginx >/dev/null; }; } ) && \
	  mkdir -p $(VENV)/nginx && dpkg -x $$tmp/nginx_*.deb $(VENV)/nginx && test -x $(NGINX); \
	  status=$$?; rm -rf $$tmp; \
	  test $$status = 0 || \
	  { echo "  could not unpack nginx: the slow-client test will skip (fail with CI=true)"; exit 1; }; fi

# The generated-client test's TypeScript tools (tests/package.json, versions locked in
# tests/package-lock.json), installed once per lock file. Without npm the install is left
# out: that test skips, or fails under CI=true, naming what is missing.
NPM_STAMP := tests/node_modules/.installed
$(NPM_STAMP): tests/package.json tests/package-lock.json
	@if command -v npm >/dev/null; then \
	  npm ci --prefix tests --no-audit --no-fund --loglevel=error && touch $(NPM_STAMP); \
	else echo "npm not found: the generated TypeScript client test will skip (fail with CI=true)"; fi

test: $(STAMP) $(NPM_STAMP) lint
	@test -x $(CHROMIUM) && { command -v nginx >/dev/null || test -x $(NGINX); } || \
	  echo "note: chromium or nginx missing (make system-deps): their tests skip, or fail under CI=true"
	$(BIN)/python -m pytest -q

# the address: CRANFIELD_BIND (default 127.0.0.1:8000, read by `cranfield serve`), its port
# replaced by PORT if given
run: $(RUN_STAMP)
	exec $(BIN)/cranfield serve $(if $(PORT),--port $(PORT))

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[bench]'
	$(BIN)/python bench/engine.py

bench-http: $(STAMP)
	$(BIN)/python bench/http.py

bench-queue: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[bench]'
	$(BIN)/python bench/datagen.py --scales M
	$(BIN)/python bench/queue.py

# Mutation testing (issue #16): mutmut over the modules where a wrong line costs most, each
# with the tests meant to catch its mistakes (module:test,test...). Not part of `make test`
# (slow). Each module is mutated in its own snapshot of HEAD (git archive) in a temporary
# directory, never in this tree: commit what you want measured. Prints the score per module
# (killed / mutants) and the survivors; `mutmut show NAME` in a kept snapshot shows one.
#   make mutation MUTATION_MODULES=cranfield/inputs/grammar.py:tests/engine/test_grammar.py
#   make mutation MUTATION_JOBS=1 MUTATION_KEEP=1   (one process; keep the snapshots)
MUTATION_MODULES ?= \
	cranfield/measures/trec.py:tests/engine/test_trec_measures.py,tests/engine/test_worked_examples.py,tests/engine/test_ap_denominator.py,tests/engine/test_cutoff_ties.py \
	cranfield/measures/trec_graded.py:tests/engine/test_trec_measures.py,tests/engine/test_worked_examples.py,tests/engine/test_ap_denominator.py,tests/engine/test_cutoff_ties.py \
	cranfield/inputs/ranking.py:tests/engine/test_ranking_reference.py,tests/engine/test_trec_measures.py,tests/engine/test_cutoff_ties.py,tests/engine/test_worked_examples.py \
	cranfield/inputs/matching.py:tests/engine/test_ranking_reference.py,tests/engine/test_hash_collisions.py,tests/engine/test_trec_measures.py \
	cranfield/compare/stats.py:tests/engine/test_stats.py,tests/engine/test_stats_wilcoxon.py,tests/engine/test_gate.py,tests/engine/test_resampling_chunks.py,tests/engine/test_stats_edges.py \
	cranfield/inputs/grammar.py:tests/engine/test_grammar.py,tests/engine/test_inputs.py,tests/engine/test_grammar_messages.py \
	backend/limits.py:tests/api/test_limits_boundaries.py,tests/api/test_comparison_limits.py,tests/api/test_limits_problems.py,tests/api/test_queued_limits.py \
	service/auth.py:tests/api/test_auth.py,tests/api/test_auth_exact.py \
	backend/store.py:tests/api/test_store_scoping.py,tests/api/test_qrels_and_jobs.py,tests/api/test_auth.py
MUTATION_JOBS ?= 2
MUTATION_KEEP ?=
mutation: $(STAMP)
	@$(BIN)/python -c 'import mutmut' 2>/dev/null || \
	  $(BIN)/python -m pip install --quiet -c constraints.txt -e '.[mutation]'
	@root=$$(pwd); status=0; \
	for spec in $(MUTATION_MODULES); do ( \
	  set -e; module=$${spec%%:*}; tests=$$(echo "$${spec#*:}" | tr , ' '); \
	  work=$$(mktemp -d "$${TMPDIR:-/tmp}/cranfield-mutation-XXXXXX"); \
	  if [ -n "$(MUTATION_KEEP)" ]; then echo "kept: $$work"; \
	  else trap 'rm -rf "$$work"' EXIT; trap 'exit 130' INT TERM; fi; \
	  git archive HEAD | tar -x -C "$$work"; \
	  { printf '[mutmut]\nsource_paths=\n    %s\nalso_copy=\n' "$$module"; \
	    printf '    %s\n' cranfield backend service worker openapi.yaml; \
	    printf 'pytest_add_cli_args_test_selection=\n'; printf '    %s\n' $$tests; \
	    printf 'pytest_add_cli_args=\n    -p\n    no:cacheprovider\n'; } > "$$work/setup.cfg"; \
	  echo "== $$module  (tests: $$tests)"; \
	  cd "$$work"; \
	  "$$root/$(BIN)/mutmut" run --max-children $(MUTATION_JOBS) > mutmut-run.log 2>&1 || \
	    { tail -c 3000 mutmut-run.log; exit 1; }; \
	  "$$root/$(BIN)/mutmut" export-cicd-stats > /dev/null; \
	  "$$root/$(BIN)/python" -c 'import json, sys; s = json.load(open(sys.argv[2])); \
	    k, t, n, u = s["killed"] + s["timeout"], s["total"] - s["skipped"], s["survived"], s["no_tests"]; \
	    print(f"{sys.argv[1]}: score {100 * k / max(t, 1):.1f}% ({k} of {t} mutants killed; " \
	          f"{n} survived, {u} without tests)")' \
	    "$$module" mutants/mutmut-cicd-stats.json; \
	  echo "survivors:"; "$$root/$(BIN)/mutmut" results 2>/dev/null | sed 's/^ */  /' \
	) || status=1; done; exit $$status

# clean also removes the extension built in place (pip install -e .) at any depth: a stale
# build (cranfield/_mapscan.*.so from before the rooms) imports where no install would
clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis tests/node_modules
	find cranfield -name '*.so' -delete
