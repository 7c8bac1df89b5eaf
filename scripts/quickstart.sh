#!/usr/bin/env bash
# The default job on a fresh machine: set up, tokenize Moby-Dick, train GPT-3 tiny
# on CPU with distributed_fused_adam over 2 MPI ranks, then print a sample and where the
# loss-curve picture and the TensorBoard files are.
# Extra arguments are config overrides, e.g. scripts/quickstart.sh trainer.max_steps=50
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
build=${ADAMANT_BUILD_DIR:-build}
data=.cache/data/moby-dick
if [ ! -f "$data/moby-dick_text_document.idx" ]; then
  "$build/adamant" preprocess --input "$data/moby-dick.txt" --output-prefix "$data/moby-dick" \
    --split-paragraphs --workers "$(nproc)"
fi
ranks=${ADAMANT_RANKS:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
mpirun -np "$ranks" --bind-to none "$build/adamant" train configs/gpt3-tiny.yaml "$@"
run=runs/gpt3-tiny
checkpoint=$run/checkpoints/$(cat "$run/checkpoints/latest")
echo "sample from $checkpoint:"
"$build/adamant" generate "$checkpoint" --prompt "The whale" --max-tokens 64 --min-tokens 48 \
  --temperature 0.8 --top-k 40 --seed 1 --device cpu
echo "loss curves: $run/loss.png (redraw: $build/adamant plot $run)"
echo "TensorBoard: tensorboard --logdir $run"
