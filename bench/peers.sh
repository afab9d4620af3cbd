#!/usr/bin/env bash
# Our output beside the peers' (onnxsim, onnxslim, onnxoptimizer, onnxscript's optimizer, ORT's
# transformers optimizer), every output timed in ORT in one interleaved run by the shared
# harness ../shared/bench/peers.py, which prints speedup ratios against the input, optimizer
# wall time, node counts and output differences.
#
#   bench/peers.sh [--only bert,gpt2] [--threads 2] [--out r.json] [--md r.md] [peers.py args]
#
# Results go to out/peers.json unless --out names another file.
#
# The peers are bench-only dependencies: they go into .venv-peers (created on first use, the
# project installed there as the README says, with its locked versions), never into .venv.
# REWRITE_ARGS adds `rewrite optimize` arguments (e.g. REWRITE_ARGS="--measure").
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
HARNESS="${PEERS_HARNESS:-$ROOT/../shared/bench/peers.py}"
MODELS="${MODELS:-$ROOT/.cache/corpus}"
VENV="$ROOT/.venv-peers"
[ -f "$HARNESS" ] || { echo "peers.sh: no harness at $HARNESS (set PEERS_HARNESS)" >&2; exit 1; }
[ -d "$MODELS" ] || { echo "peers.sh: no models at $MODELS (make test-corpus materializes them; or set MODELS)" >&2; exit 1; }
if [ ! -x "$VENV/bin/rewrite" ]; then
  PYTHON="$("$ROOT/scripts/find-python.sh")"
  "$PYTHON" -m venv "$VENV"
  PIP_CONSTRAINT="$ROOT/constraints.txt" "$VENV/bin/python" -m pip install --quiet -e "$ROOT"
  # the peers: newest releases that install beside the locked onnx / onnxruntime
  for peer in onnxsim onnxslim onnxoptimizer onnxscript rich; do
    PIP_CONSTRAINT="$ROOT/constraints.txt" "$VENV/bin/python" -m pip install --quiet "$peer" ||
      echo "peers.sh: $peer did not install; the harness records that method as failed" >&2
  done
fi
mkdir -p "$ROOT/out"
exec "$VENV/bin/python" "$HARNESS" --models "$MODELS" --out "$ROOT/out/peers.json" \
  --methods orig,orig_copy,ort_basic,onnxsim,onnxslim,onnxoptimizer,onnxscript,ort_transformers \
  --extra "rewrite=$VENV/bin/rewrite optimize {in} {out} -q ${REWRITE_ARGS:-}" "$@"
