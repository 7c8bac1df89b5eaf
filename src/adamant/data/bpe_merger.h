#pragma once
// Byte-pair merging of one pre-token, as GPT-2's bpe(): repeatedly join every
// occurrence (left to right) of the adjacent pair with the lowest rank until no
// pair merges. Done with a heap of (rank, position) in O(n log n), so a long run of
// letters or digits costs no more than its length warrants; the result equals the
// quadratic loop when find_merge_order_violation() found nothing.
//
// One BpeMerger per thread: it keeps scratch buffers between calls.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "adamant/data/bpe_merge_table.h"

namespace adamant::data {

class BpeMerger {
 public:
  // byte_token_ids[b] is the id of the one-byte token b.
  BpeMerger(const BpeMergeTable& merges, std::span<const std::int32_t, 256> byte_token_ids)
      : merges_(merges), byte_token_ids_(byte_token_ids) {}

  // Appends the token ids of `piece` (non-empty) to `out`.
  void merge(std::string_view piece, std::vector<std::int32_t>& out);

 private:
  struct Candidate {  // the pair starting at `position` merges with `rank`
    std::int32_t rank;
    std::int32_t position;
  };
  // std::*_heap build a max-heap; this puts the lowest rank, then the leftmost position, on top.
  static bool lower_priority(const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.position > b.position;
  }
  void push_candidate(std::int32_t position);

  const BpeMergeTable& merges_;
  std::span<const std::int32_t, 256> byte_token_ids_;
  // Symbols as a linked list over byte positions; a removed symbol has id -1.
  std::vector<std::int32_t> ids_;
  std::vector<std::int32_t> previous_;
  std::vector<std::int32_t> next_;
  std::vector<Candidate> heap_;
};

}  // namespace adamant::data
