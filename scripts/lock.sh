#!/usr/bin/env bash
# Regenerate constraints.txt: the newest versions pyproject.toml allows, installed into a
# fresh virtual environment, frozen. Run `make test` afterwards: constraints.txt is what CI
# tests and what the README's commands install.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=$(scripts/find-python.sh)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --upgrade pip setuptools
"$tmp/venv/bin/python" -m pip install --quiet --upgrade -e '.[dev,mutate]'
{
  echo "# The exact versions CI tested (Python $("$tmp/venv/bin/python" -c 'import platform; print(platform.python_version())')), installed by 'make venv' with -c."
  echo "# Regenerate with scripts/lock.sh; 'make test-latest' tests the newest versions allowed."
  "$tmp/venv/bin/python" -m pip freeze --all --exclude-editable | grep -v '^rewrite\b' | sort -f
} > constraints.txt
echo "wrote constraints.txt ($(grep -vc '^#' constraints.txt) packages)"
