#pragma once
// Thread-safe memo of pre-token -> token ids, shared by every encode() call of one
// tokenizer. Sharded by hash, each shard behind its own mutex, so concurrent
// encoders rarely wait on one another. A full shard is cleared, which bounds memory
// (GPT-2's Python cache grows without bound).
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace adamant::data {

class BpeCache {
 public:
  explicit BpeCache(std::size_t max_entries = std::size_t{1} << 18);
  BpeCache(const BpeCache&) = delete;
  BpeCache& operator=(const BpeCache&) = delete;

  // On a hit appends the ids of `piece` to `out` and returns true.
  bool lookup(std::string_view piece, std::vector<std::int32_t>& out);
  void insert(std::string_view piece, std::span<const std::int32_t> ids);

 private:
  struct TransparentHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<std::int32_t>, TransparentHash, std::equal_to<>> entries;
  };
  static constexpr std::size_t kShards = 64;

  Shard& shard_of(std::string_view piece);

  std::size_t max_entries_per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace adamant::data
