#!/usr/bin/env bash
# t_lint.sh - the house rules of tests/lint/lint.py in `make check`:
# include direction and module cycles (DESIGN.md section 2), file and
# function sizes, the README's source map, and function names in comments.
# Needs python3 only (no mount).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v python3 >/dev/null 2>&1 || { echo "t_lint: python3 missing"; exit 77; }
exec python3 "$here/lint.py"
