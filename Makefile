# Two commands matter: `make run` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python

.PHONY: run test install migrate clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/activate requirements.txt requirements-dev.txt
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed

migrate: install
	$(PY) manage.py migrate --no-input

run: migrate
	$(PY) manage.py seed_demo
	$(BIN)/daphne -b 127.0.0.1 -p $${PORT:-8000} controlplane.asgi:application

test: install
	$(BIN)/pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis
