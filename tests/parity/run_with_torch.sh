#!/usr/bin/env bash
# Runs gpt2_parity.py with the first python3 that imports torch and numpy; exits 77 (ctest's
# skip code for the GPU test) saying why when there is none.
for python in python3 /usr/bin/python3; do
  if command -v "$python" >/dev/null && "$python" -c "import torch, numpy" 2>/dev/null; then
    exec "$python" "$(dirname "$0")/gpt2_parity.py" "$@"
  fi
done
echo "skipped: no python3 on PATH or /usr/bin/python3 imports torch and numpy (pip install torch numpy)"
exit 77
