#!/usr/bin/env bash
# Lint and type gate: ruff lint, ruff format check, mypy (what and how strictly: pyproject).
# Usage: scripts/check.sh   (tools from ./.venv, made by `scripts/install.sh test`; another
# virtualenv with VENV=/path/to/venv). Runs all three, then fails if any of them failed.
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${VENV:-.venv}/bin"
for tool in ruff mypy; do
  if [[ ! -x "$bin/$tool" ]]; then
    echo "check.sh: $bin/$tool is missing; run scripts/install.sh test (or set VENV)" >&2
    exit 2
  fi
done

# mypy reads the tree as it is installed: `vfl.<folder>` for each top-level folder
# (pyproject's package-dir). It cannot follow the editable install's import hook, so it
# gets the same view from a folder of links, .typecheck/vfl (mypy_path in pyproject).
rm -rf .typecheck && mkdir -p .typecheck/vfl
for src in vfl/*.py vfl/*.pyi vfl/local proto rpc contract party coordinator secure celu cli attack; do
  ln -s "../../$src" ".typecheck/vfl/$(basename "$src")"
done

failed=()
"$bin/ruff" check . || failed+=("ruff check (fix: $bin/ruff check --fix .)")
"$bin/ruff" format --check . || failed+=("ruff format (fix: $bin/ruff format .)")
"$bin/mypy" || failed+=("mypy")
if ((${#failed[@]})); then
  printf 'check.sh: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "check.sh: ruff and mypy passed"
