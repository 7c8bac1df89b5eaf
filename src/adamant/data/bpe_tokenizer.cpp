#include "adamant/data/bpe_tokenizer.h"

#include <array>
#include <unordered_map>

#include "adamant/core/error.h"
#include "adamant/data/bpe_cache.h"
#include "adamant/data/bpe_files.h"
#include "adamant/data/bpe_merge_table.h"
#include "adamant/data/bpe_merger.h"
#include "adamant/data/bpe_pretokenizer.h"

namespace adamant::data {
namespace {

constexpr std::string_view kEndOfTextText = "<|endoftext|>";
// Longer pre-tokens are rare (long numbers, runs of letters without spaces) and are
// not worth the memory a cache entry takes.
constexpr std::size_t kMaxCachedPieceBytes = 64;

}  // namespace

struct BpeTokenizer::Impl {
  std::vector<std::string> token_bytes;          // by id
  std::array<std::int32_t, 256> byte_token_ids;  // id of each one-byte token
  BpeMergeTable merges;
  // Shared by concurrent encode() calls; BpeCache locks internally.
  mutable BpeCache cache;

  void encode_segment(std::string_view text, BpeMerger& merger, std::vector<std::int32_t>& ids) const {
    for (std::size_t begin = 0; begin < text.size();) {
      const std::size_t end = pretoken_end(text, begin);
      encode_piece(text.substr(begin, end - begin), merger, ids);
      begin = end;
    }
  }

  void encode_piece(std::string_view piece, BpeMerger& merger, std::vector<std::int32_t>& ids) const {
    const bool cacheable = piece.size() > 1 && piece.size() <= kMaxCachedPieceBytes;
    if (cacheable && cache.lookup(piece, ids)) return;
    const std::size_t first = ids.size();
    merger.merge(piece, ids);
    if (cacheable) cache.insert(piece, std::span(ids).subspan(first));
  }
};

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer BpeTokenizer::load(const std::filesystem::path& encoder_json, const std::filesystem::path& vocab_bpe) {
  auto impl = std::make_unique<Impl>();
  impl->token_bytes = read_bpe_encoder_json(encoder_json);
  const std::vector<BpeMergeLine> merge_lines = read_bpe_merges(vocab_bpe);
  const std::size_t vocab_size = impl->token_bytes.size();

  std::unordered_map<std::string_view, std::int32_t> id_of;
  id_of.reserve(vocab_size);
  for (std::size_t id = 0; id < vocab_size; ++id) id_of.emplace(impl->token_bytes[id], static_cast<std::int32_t>(id));

  for (unsigned byte = 0; byte < 256; ++byte) {
    const auto found = id_of.find(std::string_view(std::string(1, static_cast<char>(byte))));
    if (found == id_of.end()) {
      fail("BPE tokenizer: '{}' has no token for byte 0x{:02X}; a byte-level BPE vocabulary needs all 256 bytes",
           encoder_json.string(), byte);
    }
    impl->byte_token_ids[byte] = found->second;
  }
  if (vocab_size <= static_cast<std::size_t>(kEndOfText) || impl->token_bytes[kEndOfText] != kEndOfTextText) {
    fail("BPE tokenizer: '{}' does not give '{}' the id {}; expected GPT-2's encoder.json", encoder_json.string(),
         kEndOfTextText, kEndOfText);
  }

  std::vector<BpeMergeRule> rules;
  rules.reserve(merge_lines.size());
  const auto id_in_vocabulary = [&](const BpeMergeLine& line, const std::string& bytes) {
    const auto found = id_of.find(bytes);
    if (found == id_of.end()) {
      fail(
          "BPE tokenizer: '{}' line {}: merge '{}' + '{}' needs the token '{}', which '{}' lacks; encoder.json and "
          "vocab.bpe must come from the same tokenizer",
          vocab_bpe.string(), line.line_number, line.left, line.right, bytes, encoder_json.string());
    }
    return found->second;
  };
  for (const BpeMergeLine& line : merge_lines) {
    rules.push_back({id_in_vocabulary(line, line.left), id_in_vocabulary(line, line.right),
                     id_in_vocabulary(line, line.left + line.right), static_cast<std::int32_t>(rules.size())});
  }
  impl->merges = BpeMergeTable(rules);
  if (const auto violation = find_merge_order_violation(rules, impl->merges, vocab_size)) {
    fail(
        "BPE tokenizer: '{}': the merge on line {} uses the token '{}' that the merge on line {} creates; each "
        "token must be created before it is used",
        vocab_bpe.string(), merge_lines[violation->used_at_rank].line_number, impl->token_bytes[violation->token],
        merge_lines[violation->created_at_rank].line_number);
  }
  return BpeTokenizer(std::move(impl));
}

BpeTokenizer BpeTokenizer::load_dir(const std::filesystem::path& dir) {
  return load(dir / "encoder.json", dir / "vocab.bpe");
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 4 + 16);  // English averages about four bytes per token
  BpeMerger merger(impl_->merges, impl_->byte_token_ids);
  if (!allow_special) {
    impl_->encode_segment(text, merger, ids);
    return ids;
  }
  for (std::size_t begin = 0;;) {
    const std::size_t special = text.find(kEndOfTextText, begin);
    impl_->encode_segment(text.substr(begin, special - begin), merger, ids);
    if (special == std::string_view::npos) break;
    ids.push_back(kEndOfText);
    begin = special + kEndOfTextText.size();
  }
  return ids;
}

std::string BpeTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string text;
  text.reserve(ids.size() * 4);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<std::size_t>(ids[i]) >= impl_->token_bytes.size()) {
      fail("BpeTokenizer::decode: token id {} at position {} is outside the vocabulary 0..{}", ids[i], i,
           impl_->token_bytes.size() - 1);
    }
    text += impl_->token_bytes[ids[i]];
  }
  return text;
}

std::size_t BpeTokenizer::vocab_size() const { return impl_->token_bytes.size(); }

}  // namespace adamant::data
