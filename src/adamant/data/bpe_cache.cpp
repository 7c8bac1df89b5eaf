#include "adamant/data/bpe_cache.h"

#include <algorithm>

namespace adamant::data {

BpeCache::BpeCache(std::size_t max_entries) : max_entries_per_shard_(std::max<std::size_t>(1, max_entries / kShards)) {}

BpeCache::Shard& BpeCache::shard_of(std::string_view piece) {
  // The top bits pick the shard; the map inside uses the low bits for its buckets.
  const std::size_t hash = TransparentHash{}(piece);
  return shards_[(hash >> 58) % kShards];
}

bool BpeCache::lookup(std::string_view piece, std::vector<std::int32_t>& out) {
  Shard& shard = shard_of(piece);
  const std::lock_guard lock(shard.mutex);
  const auto found = shard.entries.find(piece);
  if (found == shard.entries.end()) return false;
  out.insert(out.end(), found->second.begin(), found->second.end());
  return true;
}

void BpeCache::insert(std::string_view piece, std::span<const std::int32_t> ids) {
  Shard& shard = shard_of(piece);
  const std::lock_guard lock(shard.mutex);
  if (shard.entries.size() >= max_entries_per_shard_) shard.entries.clear();
  shard.entries.try_emplace(std::string(piece), ids.begin(), ids.end());
}

}  // namespace adamant::data
