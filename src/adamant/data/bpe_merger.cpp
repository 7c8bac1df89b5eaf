#include "adamant/data/bpe_merger.h"

#include <algorithm>

namespace adamant::data {
namespace {

constexpr std::int32_t kNone = -1;

}  // namespace

void BpeMerger::push_candidate(std::int32_t position) {
  const std::int32_t next = next_[position];
  if (next == kNone) return;
  if (const BpeMergeTable::Merge* merge = merges_.find(ids_[position], ids_[next]); merge != nullptr) {
    heap_.push_back({merge->rank, position});
    std::push_heap(heap_.begin(), heap_.end(), lower_priority);
  }
}

void BpeMerger::merge(std::string_view piece, std::vector<std::int32_t>& out) {
  const auto size = static_cast<std::int32_t>(piece.size());
  if (size == 1) {
    out.push_back(byte_token_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  ids_.resize(piece.size());
  previous_.resize(piece.size());
  next_.resize(piece.size());
  heap_.clear();
  for (std::int32_t i = 0; i < size; ++i) {
    ids_[i] = byte_token_ids_[static_cast<unsigned char>(piece[i])];
    previous_[i] = i - 1;
    next_[i] = i + 1 < size ? i + 1 : kNone;
  }
  for (std::int32_t i = 0; i + 1 < size; ++i) push_candidate(i);

  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), lower_priority);
    const Candidate candidate = heap_.back();
    heap_.pop_back();
    const std::int32_t left = candidate.position;
    if (ids_[left] == kNone || next_[left] == kNone) continue;  // stale: the symbol was absorbed
    const std::int32_t right = next_[left];
    const BpeMergeTable::Merge* merge = merges_.find(ids_[left], ids_[right]);
    // Stale unless the pair there still merges at this rank (ranks identify pairs).
    if (merge == nullptr || merge->rank != candidate.rank) continue;
    ids_[left] = merge->merged;
    ids_[right] = kNone;
    next_[left] = next_[right];
    if (next_[left] != kNone) previous_[next_[left]] = left;
    if (previous_[left] != kNone) push_candidate(previous_[left]);
    push_candidate(left);
  }
  for (std::int32_t i = 0; i != kNone; i = next_[i]) out.push_back(ids_[i]);
}

}  // namespace adamant::data
