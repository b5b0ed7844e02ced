#!/usr/bin/env bash
# Fails when the code or the docs refer to "issue N" or "stage N": a reader
# of the repository cannot look them up. Point to the test or the docs
# section that holds the claim instead. The raw outputs of benchmark runs
# (bench/results/) are records, not docs, and are not checked.
set -euo pipefail
cd "$(dirname "$0")/.."
if git grep -n -I -i -E '\b(issue|issues|stage|stages) #?[0-9]+' -- \
  '*.go' '*.md' '*.sh' '*.py' '*.yaml' '*.yml' '*.tpl' 'Makefile' ':!bench/results/'; then
  echo 'check-refs: the lines above refer to an issue or a stage; point to a test or a docs section instead' >&2
  exit 1
fi
