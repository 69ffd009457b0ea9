# Everyday entry points. The venv is the one `.ci/run` (or `python3 -m venv .venv &&
# .venv/bin/pip install -e '.[dev]'`) builds; override with `make PY=/path/to/python`.
PY ?= .venv/bin/python
BIN := $(dir $(PY))
PORT ?= 8888
# jupyter refuses to start as root without --allow-root (containers run as root)
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
# Keep JupyterLab off the network: no news feed, no update check, no extension manager
# searches (measured: with these three nothing leaves the machine; see docs/design/jupyter.md §5).
LAB_OFFLINE := --LabApp.news_url=None \
	--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
	--LabApp.extension_manager=readonly
# The flags do not silence the "Would you like to get notified about official Jupyter news?"
# toast: Lab 4.6 asks whenever the notification setting fetchNews is unset, whatever news_url
# says. So `lab` also overrides that setting's default (a labconfig file on JUPYTER_CONFIG_PATH):
# a new user gets no toast, and a user setting still wins over it.
LAB_CONFIG ?= out/lab-config
LAB_SETTING_DEFAULTS := {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}
NOTEBOOK_DIR ?= notebooks
# Extra jupyter-lab flags; the browser tests pass their token here. They start the server
# from `make -n lab`, so what they test is this recipe.
LAB_ARGS ?=

.PHONY: lab demo test test-fast test-browser bench

## lab: open JupyterLab on notebooks/ (127.0.0.1 only, offline, no news toast); start with 00_dashboard.ipynb
lab:
	mkdir -p $(LAB_CONFIG)/labconfig
	printf '%s\n' '$(LAB_SETTING_DEFAULTS)' > $(LAB_CONFIG)/labconfig/default_setting_overrides.json
	JUPYTER_CONFIG_PATH=$(abspath $(LAB_CONFIG))$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH)) \
		exec $(BIN)jupyter-lab $(ALLOW_ROOT) --ip=127.0.0.1 --port=$(PORT) --no-browser \
		--ServerApp.root_dir=$(NOTEBOOK_DIR) $(LAB_OFFLINE) $(LAB_ARGS)

## demo: the offline main job (intervals + before/after report), then the dashboard notebook headless
demo:
	$(PY) -m toolkit demo
	TOOLKIT_SMALL=1 $(BIN)jupyter-nbconvert --to notebook --execute --output-dir out/demo \
		notebooks/00_dashboard.ipynb

## test: the whole suite, as CI runs it (the browser test included when chromium is installed)
test:
	$(PY) -m pytest

## test-fast: everything except the real-browser test
test-fast:
	$(PY) -m pytest -m "not browser"

## test-browser: only the JupyterLab + Chromium test
test-browser:
	$(PY) -m pytest -m browser tests/browser

## bench: dashboard overhead (same offline simulation with and without the dashboard)
bench:
	$(PY) benchmarks/bench_live.py
