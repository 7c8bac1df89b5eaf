#!/usr/bin/env bash
# Slurm on one machine: slurmctld and slurmd on localhost (auth/none, so no munge daemon),
# and `srun --mpi=pmix` starting 2 ranks of `adamant train`, which must form one world of 2,
# take their node-local rank from Slurm and log, bitwise, the losses of `mpirun -np 2`.
# Usage (from ctest):
#   slurm_test.sh <adamant binary> <data dir> <work dir>
# Exits 77 (ctest: skipped), with the reason, where Slurm is not installed or cannot start.
set -euo pipefail
adamant=$(realpath "$1")
data=$(realpath "$2")
work=$3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/run_losses.sh"

skip() {
  echo "SKIPPED: $*"
  exit 77
}
fail() {
  echo "FAILED: $*"
  exit 1
}

for tool in slurmctld slurmd srun sinfo mpirun; do
  command -v "$tool" >/dev/null ||
    skip "$tool is not installed (scripts/setup.sh installs Debian's slurmctld, slurmd, slurm-client, openmpi-bin)"
done
[[ $(id -u) -eq 0 ]] || skip "slurmd must run as root to start tasks"

rm -rf "$work"
mkdir -p "$work/state" "$work/spool"
work=$(realpath "$work")

# Two free TCP ports on localhost for the daemons.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ports=()
for ((port = 20000 + ($$ % 20000); ${#ports[@]} < 2 && port < 65000; port += 7)); do
  port_in_use "$port" || ports+=("$port")
done
[[ ${#ports[@]} -eq 2 ]] || skip "no free TCP ports for slurmctld and slurmd"

export SLURM_CONF="$work/slurm.conf"
cat >"$SLURM_CONF" <<CONF
ClusterName=adamant
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=node0 NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=ci Nodes=ALL Default=YES MaxTime=10 State=UP
CONF

slurmctld -D -i >"$work/slurmctld.log" 2>&1 &
slurmctld_pid=$!
slurmd -D -N node0 >"$work/slurmd.log" 2>&1 &
slurmd_pid=$!
stop_slurm() {
  kill "$slurmd_pid" "$slurmctld_pid" 2>/dev/null || true
  wait "$slurmd_pid" "$slurmctld_pid" 2>/dev/null || true
}
trap stop_slurm EXIT

for ((tries = 0; tries < 60; ++tries)); do
  [[ $(sinfo -h -n node0 -o %T 2>/dev/null) == idle ]] && break
  kill -0 "$slurmctld_pid" "$slurmd_pid" 2>/dev/null || break
  sleep 0.5
done
if [[ $(sinfo -h -n node0 -o %T 2>/dev/null) != idle ]]; then
  tail -n 5 "$work/slurmctld.log" "$work/slurmd.log"
  skip "slurmctld and slurmd did not start on localhost (their logs above)"
fi
srun --mpi=list 2>&1 | grep -qw pmix || skip "this Slurm has no PMIx plugin (srun --mpi=list)"
echo "ok: slurmctld and slurmd run on localhost; srun offers pmix"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
head -c 120000 "$data/moby-dick/moby-dick.txt" >"$work/corpus.txt"
"$adamant" preprocess --input "$work/corpus.txt" --output-prefix "$work/corpus" --vocab-dir "$data/gpt2" \
  --split-paragraphs --workers 1 >"$work/preprocess.log"
train=("$adamant" train "$here/multinode-tiny.yaml" "model.data.data_prefix=[$work/corpus_text_document]"
  "model.tokenizer.vocab_file=$data/gpt2/encoder.json" "model.tokenizer.merge_file=$data/gpt2/vocab.bpe"
  trainer.max_steps=4 exp_manager.create_checkpoint_callback=false)

(cd "$work" && timeout 120 mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader \
  "${train[@]}" "exp_manager.exp_dir=$work/mpirun") >"$work/mpirun.log" 2>&1 ||
  { cat "$work/mpirun.log"; fail "the mpirun run"; }
# --overcommit: a CI machine may have fewer cores than ranks.
(cd "$work" && timeout 120 srun --mpi=pmix -n 2 --overcommit --kill-on-bad-exit=1 --time=5 \
  "${train[@]}" "exp_manager.exp_dir=$work/srun") >"$work/srun.log" 2>&1 ||
  { cat "$work/srun.log"; fail "the srun --mpi=pmix run"; }
grep -q "parallel: 2 data-parallel rank(s)" "$work/srun.log" ||
  { cat "$work/srun.log"; fail "the srun tasks did not form one world of 2 ranks"; }
grep -q "1 host(s) (.*), 2 rank(s) on this one; node-local rank from SLURM_LOCALID" "$work/srun.log" ||
  { cat "$work/srun.log"; fail "the srun run did not take its node-local ranks from Slurm"; }
echo "ok: srun --mpi=pmix starts one world of 2 ranks, node-local ranks from Slurm"
expect_same_losses "$work/mpirun" "$work/srun" "2 ranks started by srun --mpi=pmix train as under mpirun"
