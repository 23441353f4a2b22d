# The two commands: `make demo` and `make test`. Both build .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned here (not in pyproject) so a fresh machine gets the CPU wheel it has on disk;
# on a GPU machine override it: make TORCH_SPEC="torch" ...
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

# axe-core, the accessibility checker the browser tests inject into each page (never served
# by the app): npm installs this pinned version into an ignored folder for `make test` only
AXE_VERSION := 4.11.0
AXE_JS := .tools/axe-$(AXE_VERSION)/node_modules/axe-core/axe.min.js

.PHONY: demo test lint bench clean chromium axe

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e ".[test,style]"
	touch $(STAMP)

# only the browser tests need it: they drive Debian's chromium (Playwright's own download is not used)
chromium:
	@test -x /usr/bin/chromium || { test "$$(id -u)" = 0 && apt-get update -q && apt-get install -y -q chromium; } \
		|| echo "warning: no /usr/bin/chromium (install it as root: apt-get install chromium); browser tests will skip"

axe: $(AXE_JS)

$(AXE_JS):
	@command -v npm >/dev/null && npm install --silent --no-save --no-audit --no-fund --no-package-lock \
		--prefix .tools/axe-$(AXE_VERSION) axe-core@$(AXE_VERSION) \
		|| echo "warning: no axe-core (install Node.js and npm, then make axe); the accessibility tests will skip"

demo: $(STAMP)
	$(BIN)/vismerch demo --out demo-output

test: $(STAMP) chromium axe
	$(BIN)/ruff check src tests benchmarks
	VISMERCH_AXE=$(AXE_JS) $(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/ingest.py

clean:
	rm -rf $(VENV) demo-output .pytest_cache .tools
