#!/usr/bin/env bash
# Packs programs of a build to run on a machine that has the GPU driver, the CUDA toolkit and
# Open MPI but not the other libraries they were linked with (yaml-cpp, OpenBLAS, fmt, ...,
# or other versions of them): a GPU node of a cluster, or a machine where nothing is built.
#
# Usage: scripts/pack_build.sh BUILD OUT TARGET...
#   BUILD   the build folder (cmake -B BUILD)
#   OUT     the folder to write: each TARGET at the same path under OUT, and in OUT/lib every
#           shared library the targets load, found here by ldd, except the C and C++ runtimes,
#           the CUDA toolkit's and driver's libraries and Open MPI's, and what those load (they
#           must be the target machine's own, matching its driver and its mpirun)
#   TARGET  a program's path under BUILD: adamant, tests/model/gpu_model_tests, bench/...
# Then, on the other machine: source OUT/env.sh (it puts OUT/lib first on LD_LIBRARY_PATH)
# and run OUT/adamant, or pass OUT as BUILD to bench/gpu_training_bench.sh.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: scripts/pack_build.sh BUILD OUT TARGET..." >&2
  exit 2
fi
build=$1 out=$2
shift 2
[ -d "$build" ] || { echo "BUILD '$build': no such folder (build first: cmake -B $build && cmake --build $build)" >&2; exit 2; }
for target in "$@"; do
  [ -x "$build/$target" ] || { echo "TARGET '$target': no program $build/$target (build it: cmake --build $build --target $(basename "$target"))" >&2; exit 2; }
done

# The libraries the machine provides: glibc's, the C++ runtime, CUDA's, the driver's, Open MPI's.
provided='/(ld-linux[^/]*|lib(c|m|dl|rt|pthread|stdc\+\+|gcc_s|cuda|cudart|cublas|cublasLt|nccl|nvrtc|cudnn[^/]*|mpi[^/]*|open-(pal|rte)|hwloc|pmix|event[^/]*))\.so[^/]*$'
mkdir -p "$out/lib"
for target in "$@"; do
  mkdir -p "$out/$(dirname "$target")"
  cp -f "$build/$target" "$out/$target"
  resolved=$(ldd "$build/$target")
  missing=$(grep "not found" <<< "$resolved" || true)
  if [ -n "$missing" ]; then
    echo "TARGET '$target': ldd finds no $(echo "$missing" | awk '{print $1}' | tr '\n' ' ')here; install them first" >&2
    exit 2
  fi
  libraries=$(awk '$2 == "=>" && $3 ~ /^\// {print $3}' <<< "$resolved")
  # What a provided library loads (hwloc's libudev, say) comes with it on that machine.
  comes_with_provided=$(for library in $libraries; do
    if [[ "$library" =~ $provided ]]; then ldd "$library" | awk '$2 == "=>" {print $3}'; fi
  done | sort -u)
  for library in $libraries; do
    # The CUDA toolkit's folders (the standard one, and NVIDIA's HPC SDK under /opt/nvidia) are the
    # machine's own; any other library, /opt's included, is packed.
    case "$library" in /usr/local/cuda* | /opt/nvidia/*) continue ;; esac
    [[ "$library" =~ $provided ]] && continue
    grep -qxF "$library" <<< "$comes_with_provided" && continue
    cp -fL "$library" "$out/lib/"
  done
done
cat > "$out/env.sh" << 'ENV'
# source this file: the packed programs then load the libraries packed with them.
packed_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$packed_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ENV
echo "packed $# program(s) and $(find "$out/lib" -type f | wc -l) libraries into $out ($(du -sh "$out" | cut -f1)); source $out/env.sh there"
