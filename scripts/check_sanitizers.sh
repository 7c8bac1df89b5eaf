#!/usr/bin/env bash
# CI's checking build (after scripts/test.sh): a CPU-only clang build with AddressSanitizer and
# UndefinedBehaviorSanitizer in build-asan/ runs the suites of the layers that read files (core/,
# data/: archives, datasets, tokenizer, preprocess), then each libFuzzer target (config, index,
# checkpoint and preprocess readers) runs for a bounded time from its seeds in tests/fuzz/corpus/.
# The layers above (model/, optim/, train/) are not built here, to keep the added CI time small.
#   ADAMANT_FUZZ_SECONDS  time per fuzzer (default 20)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${ADAMANT_SANITIZE_BUILD_DIR:-build-asan}
seconds=${ADAMANT_FUZZ_SECONDS:-20}
suites=(core_tests dataset_tests preprocess_tests tokenizer_tests)
fuzzers=(config index checkpoint preprocess)

start=$(date +%s)
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DADAMANT_CUDA=OFF \
    -DADAMANT_SANITIZE=ON -DADAMANT_FUZZ=ON -DCMAKE_CXX_FLAGS=-Wno-pass-failed ${ADAMANT_CMAKE_ARGS:-}
fi
cmake --build "$build" -j "$(nproc)" --target "${suites[@]}" "${fuzzers[@]/%/_fuzz}"
built=$(date +%s)

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ctest --test-dir "$build" -R "^($(IFS='|'; echo "${suites[*]}"))\$" --output-on-failure -j 2 --timeout 900
tested=$(date +%s)

export ADAMANT_DATA_DIR="$root/.cache/data"
scratch=$(mktemp -d /tmp/adamant-fuzz-corpus.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
for fuzzer in "${fuzzers[@]}"; do
  mkdir -p "$scratch/$fuzzer"
  # New inputs go to the scratch folder; the seeds in the repo stay as they are.
  if ! "$build/tests/fuzz/${fuzzer}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$scratch/" "$scratch/$fuzzer" "tests/fuzz/corpus/$fuzzer" \
      >"$scratch/$fuzzer.log" 2>&1; then
    tail -n 60 "$scratch/$fuzzer.log"
    echo "fuzzer $fuzzer found a failure (its log is above)"
    exit 1
  fi
  echo "$fuzzer: $(grep -E '^stat::number_of_executed_units' "$scratch/$fuzzer.log" | awk '{print $2}') inputs in ${seconds} s"
done
echo "sanitizers: build $((built - start)) s, tests $((tested - built)) s, fuzzing $(($(date +%s) - tested)) s"
