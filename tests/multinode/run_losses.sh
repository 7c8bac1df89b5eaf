# shellcheck shell=bash
# Train losses of runs of multinode-tiny.yaml, for the launcher tests. Source it; the caller
# defines fail() and $work.

# The train losses of a run, one "step loss" line each.
losses() {
  grep '"type":"train"' "$1/multinode/metrics.jsonl" | sed -E 's/.*"step":([0-9]+).*/\1/' >"$work/steps.tmp"
  grep '"type":"train"' "$1/multinode/metrics.jsonl" | sed -E 's/.*"loss":([^,}]*).*/\1/' | paste -d' ' "$work/steps.tmp" -
}

expect_same_losses() {  # <expected run> <actual run> <what>
  local expected actual
  expected=$(losses "$1")
  actual=$(losses "$2")
  [[ -n $expected ]] || fail "$1 logged no train losses"
  if [[ $expected != "$actual" ]]; then
    echo "expected ($1):"; echo "$expected"; echo "actual ($2):"; echo "$actual"
    fail "$3"
  fi
  echo "ok: $3 ($(echo "$actual" | wc -l) steps, bitwise equal)"
}
