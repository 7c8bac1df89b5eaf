#!/usr/bin/env bash
# GPT-3 training throughput on the GPU machine: Adamant against the PyTorch peer
# (bench/torch_gpt_peer.py: bf16 autocast, SDPA, torch.compile, fused AdamW), same
# shapes, same machine, one after the other. Needs a CUDA build in $BUILD (default
# build-dev) and the Moby-Dick dataset from scripts/quickstart.sh in .cache/data.
# Usage: bench/gpu_training_bench.sh [126m|1.3b] [gpus]
set -euo pipefail
size=${1:-126m}
gpus=${2:-1}
build=${BUILD:-build-dev}
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
case "$size" in
  126m) config=configs/gpt3-126m.yaml; shape=(--layers 12 --hidden 768 --heads 12); mbs=8 ;;
  1.3b) config=configs/gpt3-1.3b.yaml; shape=(--layers 24 --hidden 2048 --heads 16); mbs=4 ;;
  *) echo "usage: $0 [126m|1.3b] [gpus]" >&2; exit 2 ;;
esac
gbs=$((mbs * gpus))
echo "== Adamant GPT-3 $size, $gpus GPU(s), micro-batch $mbs, seq 2048, distributed_fused_adam"
mpirun --allow-run-as-root -np "$gpus" --bind-to none -x NCCL_NVLS_ENABLE=0 "$build/adamant" train "$config" \
  trainer.max_steps=12 trainer.limit_val_batches=0 trainer.log_every_n_steps=1 \
  model.global_batch_size=$gbs model.micro_batch_size=$mbs exp_manager.create_checkpoint_callback=false \
  exp_manager.exp_dir=/tmp/adamant-bench-$size-$gpus 2>&1 | grep -E "^(model|parallel|optimizer|memory)|step +(1|10|11|12)/"
echo "== PyTorch GPT-3 $size, $gpus GPU(s), micro-batch $mbs, seq 2048"
if [ "$gpus" -eq 1 ]; then
  python3 bench/torch_gpt_peer.py "${shape[@]}" --seq 2048 --micro-batch $mbs --steps 10 2>&1 | grep "^torch"
else
  torchrun --nproc_per_node "$gpus" bench/torch_gpt_peer.py "${shape[@]}" --seq 2048 --micro-batch $mbs --steps 10 \
    --parallel ddp 2>&1 | grep "^torch"
fi
