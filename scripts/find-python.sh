#!/usr/bin/env bash
# Print the path of a Python >= 3.12 (egglog 14 needs it): PATH first, then pyenv.
# Exit 1 with a message naming what was tried when there is none.
set -u
ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
tried=()
for name in python3.13 python3.12 python3 python; do
  if command -v "$name" >/dev/null 2>&1; then
    tried+=("$name")
    if ok "$name"; then
      "$name" -c 'import sys; print(sys.executable)'
      exit 0
    fi
  fi
done
if command -v pyenv >/dev/null 2>&1; then
  root=$(pyenv root)
  for dir in $(ls -d "$root"/versions/3.1[2-9]* 2>/dev/null | sort -V); do
    tried+=("$dir/bin/python3")
    if ok "$dir/bin/python3"; then
      echo "$dir/bin/python3"
      exit 0
    fi
  done
fi
echo "rewrite needs Python >= 3.12 (egglog 14); none found. Tried: ${tried[*]:-nothing}." >&2
echo "Install one (e.g. 'pyenv install 3.12') or put it on PATH as python3.12." >&2
exit 1
