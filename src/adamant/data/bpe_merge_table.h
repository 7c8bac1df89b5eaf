#pragma once
// BPE merge rules from vocab.bpe, looked up by the ids of the two tokens they join.
// A rule's rank is its position in vocab.bpe: lower ranks merge first.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace adamant::data {

struct BpeMergeRule {
  std::int32_t left;
  std::int32_t right;
  std::int32_t merged;
  std::int32_t rank;
};

class BpeMergeTable {
 public:
  struct Merge {
    std::int32_t rank;
    std::int32_t merged;
  };

  BpeMergeTable() = default;
  // A pair listed twice keeps its last rank, as the Python dict GPT-2 builds from the list does.
  explicit BpeMergeTable(std::span<const BpeMergeRule> rules);

  // The merge of the adjacent tokens (left, right), or nullptr if they do not merge.
  const Merge* find(std::int32_t left, std::int32_t right) const {
    if (slots_.empty()) return nullptr;
    const std::uint64_t key = pack(left, right);
    for (std::uint64_t slot = hash(key) & mask_;; slot = (slot + 1) & mask_) {
      if (slots_[slot].key == key) return &slots_[slot].merge;
      if (slots_[slot].key == kEmptyKey) return nullptr;
    }
  }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::uint64_t kEmptyKey = ~std::uint64_t{0};  // ids are non-negative, so no real key
  struct Slot {
    std::uint64_t key = kEmptyKey;
    Merge merge{};
  };
  static std::uint64_t pack(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
  }
  static std::uint64_t hash(std::uint64_t key) {  // splitmix64 finaliser: spreads the packed ids over all bits
    key = (key ^ (key >> 30)) * 0xBF58476D1CE4E5B9ull;
    key = (key ^ (key >> 27)) * 0x94D049BB133111EBull;
    return key ^ (key >> 31);
  }

  std::vector<Slot> slots_;  // open addressing, linear probing, at most half full
  std::uint64_t mask_ = 0;
  std::size_t size_ = 0;
};

// A token that some merge uses no later than the last merge that creates it.
struct MergeOrderViolation {
  std::int32_t token;
  std::int32_t created_at_rank;
  std::int32_t used_at_rank;
};

// BpeMerger's heap order equals GPT-2's loop only when every token is created by
// merges ranked before every merge that uses it (true of any vocab.bpe written by
// BPE training, since a merge can only use tokens that exist). Checks that for the
// rules in effect in `table`; token ids must be below vocab_size.
std::optional<MergeOrderViolation> find_merge_order_violation(std::span<const BpeMergeRule> rules,
                                                              const BpeMergeTable& table, std::size_t vocab_size);

}  // namespace adamant::data
