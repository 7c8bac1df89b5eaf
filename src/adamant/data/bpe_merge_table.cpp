#include "adamant/data/bpe_merge_table.h"

#include <bit>
#include <limits>

namespace adamant::data {

BpeMergeTable::BpeMergeTable(std::span<const BpeMergeRule> rules) {
  slots_.resize(std::bit_ceil(std::max<std::size_t>(2 * rules.size(), 16)));
  mask_ = slots_.size() - 1;
  for (const BpeMergeRule& rule : rules) {
    const std::uint64_t key = pack(rule.left, rule.right);
    std::uint64_t slot = hash(key) & mask_;
    while (slots_[slot].key != kEmptyKey && slots_[slot].key != key) slot = (slot + 1) & mask_;
    if (slots_[slot].key == kEmptyKey) ++size_;
    slots_[slot] = {key, {rule.rank, rule.merged}};
  }
}

std::optional<MergeOrderViolation> find_merge_order_violation(std::span<const BpeMergeRule> rules,
                                                              const BpeMergeTable& table, std::size_t vocab_size) {
  constexpr std::int32_t kNever = -1;
  std::vector<std::int32_t> last_created(vocab_size, kNever);
  std::vector<std::int32_t> first_used(vocab_size, std::numeric_limits<std::int32_t>::max());
  for (const BpeMergeRule& rule : rules) {
    const BpeMergeTable::Merge* in_effect = table.find(rule.left, rule.right);
    if (in_effect == nullptr || in_effect->rank != rule.rank) continue;  // shadowed by a later duplicate
    last_created[rule.merged] = std::max(last_created[rule.merged], rule.rank);
    for (const std::int32_t part : {rule.left, rule.right}) first_used[part] = std::min(first_used[part], rule.rank);
  }
  for (std::size_t token = 0; token < vocab_size; ++token) {
    if (last_created[token] != kNever && last_created[token] >= first_used[token]) {
      return MergeOrderViolation{static_cast<std::int32_t>(token), last_created[token], first_used[token]};
    }
  }
  return std::nullopt;
}

}  // namespace adamant::data
