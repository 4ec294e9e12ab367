#!/usr/bin/env bash
# Print the path of a Python >= 3.12 interpreter, or explain how to get one and exit 1.
# Order: $PYTHON, python3.14..python3.12 on PATH, pyenv-installed versions, python3.
set -u
want_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; }
candidates=()
[ -n "${PYTHON:-}" ] && candidates+=("$PYTHON")
for v in 3.14 3.13 3.12; do
  p=$(command -v "python$v" 2>/dev/null) && candidates+=("$p")
done
for root in "${PYENV_ROOT:-$HOME/.pyenv}/versions" /usr/local/bin /usr/bin; do
  for p in "$root"/3.1[2-9]*/bin/python3 "$root"/python3.1[2-9]; do
    [ -x "$p" ] && candidates+=("$p")
  done
done
p=$(command -v python3 2>/dev/null) && candidates+=("$p")
for c in "${candidates[@]}"; do
  if want_ok "$c"; then
    # Resolve pyenv shims to the real interpreter so the venv does not depend on pyenv state.
    "$c" -c 'import sys; print(sys.executable)'
    exit 0
  fi
done
echo "error: no Python 3.12 or newer found (tried: ${candidates[*]:-nothing})." >&2
echo "fix: install one (e.g. 'apt-get install python3.12' or 'pyenv install 3.12'), or set PYTHON=/path/to/python3.12" >&2
exit 1
