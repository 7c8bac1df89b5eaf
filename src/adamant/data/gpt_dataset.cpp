#include "adamant/data/gpt_dataset.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "adamant/core/crc32c.h"
#include "adamant/core/error.h"
#include "adamant/data/shuffle.h"

namespace adamant::data {
namespace {

// The documents of the range, once per epoch, shuffled together (numpy's order of draws).
void append_shuffled_epochs(DocumentRange documents, int epochs, ShuffleRng& rng, std::vector<std::int32_t>& order) {
  const std::size_t first = order.size();
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (std::size_t doc = documents.begin; doc < documents.end; ++doc) order.push_back(static_cast<std::int32_t>(doc));
  }
  rng.shuffle(std::span<std::int32_t>(order).subspan(first));
}

void append_shuffled_range(std::int64_t begin, std::int64_t end, ShuffleRng& rng, std::vector<std::int64_t>& order) {
  const std::size_t first = order.size();
  for (std::int64_t i = begin; i < end; ++i) order.push_back(i);
  rng.shuffle(std::span<std::int64_t>(order).subspan(first));
}

}  // namespace

GptDataset::GptDataset(std::shared_ptr<const IndexedDataset> data, const GptDatasetOptions& options)
    : data_(std::move(data)), name_(options.name), documents_(options.documents), seq_length_(options.seq_length) {
  ADAMANT_CHECK(data_ != nullptr, "GptDataset {}: no indexed dataset", name_);
  const std::string prefix = data_->prefix().string();
  ADAMANT_CHECK(seq_length_ > 0, "GptDataset {} ({}): seq_length {} must be positive (model.encoder_seq_length)", name_,
                prefix, seq_length_);
  ADAMANT_CHECK(options.num_samples >= 0, "GptDataset {} ({}): negative sample count {}", name_, prefix,
                options.num_samples);
  ADAMANT_CHECK(!documents_.empty() && documents_.end <= data_->num_sequences(),
                "GptDataset {} ({}): document range [{}, {}) is empty or beyond the {} documents; adjust "
                "model.data.splits_string",
                name_, prefix, documents_.begin, documents_.end, data_->num_sequences());

  const auto sizes = data_->sizes();
  for (std::size_t doc = documents_.begin; doc < documents_.end; ++doc) tokens_per_epoch_ += sizes[doc];
  ADAMANT_CHECK(tokens_per_epoch_ > 1,
                "GptDataset {} ({}): the {} documents of this split hold {} tokens; a sample "
                "needs at least 2. Use more data or another model.data.splits_string",
                name_, prefix, documents_.size(), tokens_per_epoch_);

  // Fewest epochs whose tokens give num_samples samples (one token overlaps between samples).
  // (E * tokens - 1) / seq >= num_samples  <=>  E >= (num_samples * seq + 1) / tokens; at least one.
  const std::int64_t needed_tokens = options.num_samples * seq_length_ + 1;
  const std::int64_t epochs = std::max<std::int64_t>(1, (needed_tokens + tokens_per_epoch_ - 1) / tokens_per_epoch_);
  const std::int64_t total_tokens = epochs * tokens_per_epoch_;

  // The index arrays grow with epochs x documents and with samples. Far more samples than
  // the data holds (a long run on a small corpus) would exhaust memory before training
  // starts: refuse with the numbers instead.
  const double index_bytes =
      static_cast<double>(epochs) * static_cast<double>(documents_.size()) * sizeof(std::int32_t) +
      static_cast<double>(total_tokens / seq_length_ + 1) * (sizeof(SampleStart) + sizeof(std::int64_t));
  ADAMANT_CHECK(index_bytes <= kMaxIndexBytes,
                "GptDataset {} ({}): {} samples of {} tokens (trainer.max_steps x model.global_batch_size) need {} "
                "passes over this split's {} tokens, and its index would take {:.1f} GiB; point "
                "model.data.data_prefix at a larger corpus or lower trainer.max_steps",
                name_, prefix, options.num_samples, seq_length_, epochs, tokens_per_epoch_,
                index_bytes / (1024.0 * 1024.0 * 1024.0));
  num_epochs_ = static_cast<int>(epochs);  // below 2^31: the index bound above is far smaller

  // From the cache when it holds these arrays; else built here (and saved when a cache is set).
  GptIndexKey key;
  key.split = name_;
  key.documents = documents_;
  key.seq_length = seq_length_;
  key.num_samples = options.num_samples;
  key.seed = options.seed;
  key.sizes_checksum = crc32c(sizes.data() + documents_.begin, documents_.size() * sizeof(sizes[0]));
  const std::filesystem::path cache_file = options.index_cache_dir.empty()
                                               ? std::filesystem::path()
                                               : index_cache_file(options.index_cache_dir, data_->prefix(), key);
  if (!cache_file.empty()) {
    if (auto cached = open_index_cache(cache_file, key);
        cached && cached->arrays.num_epochs == num_epochs_ && cached->arrays.tokens_per_epoch == tokens_per_epoch_) {
      mapped_ = std::move(cached->file);
      document_order_ = cached->arrays.document_order;
      sample_starts_ = cached->arrays.sample_starts;
      shuffle_order_ = cached->arrays.shuffle_order;
      return;
    }
  }
  build(options);
  if (!cache_file.empty()) {
    write_index_cache(cache_file, key,
                      {document_order_, sample_starts_, shuffle_order_, num_epochs_, tokens_per_epoch_});
  }
}

void GptDataset::build(const GptDatasetOptions& options) {
  const auto sizes = data_->sizes();
  // Megatron shuffles a last, mostly unused epoch on its own, so that its few samples do not
  // dilute the earlier epochs' shuffle: when it contributes less than 80% of an epoch's samples.
  bool separate_last_epoch = false;
  std::int64_t samples_before_last_epoch = 0;
  if (num_epochs_ > 1) {
    samples_before_last_epoch = ((num_epochs_ - 1) * tokens_per_epoch_ - 1) / seq_length_;
    const std::int64_t last_epoch_samples = options.num_samples - samples_before_last_epoch;
    const std::int64_t samples_per_epoch = (tokens_per_epoch_ - 1) / seq_length_;
    separate_last_epoch = last_epoch_samples < static_cast<std::int64_t>(0.80 * static_cast<double>(samples_per_epoch));
  }

  ShuffleRng rng(options.seed);
  owned_document_order_.reserve(documents_.size() * static_cast<std::size_t>(num_epochs_));
  if (separate_last_epoch) {
    append_shuffled_epochs(documents_, num_epochs_ - 1, rng, owned_document_order_);
    append_shuffled_epochs(documents_, 1, rng, owned_document_order_);
  } else {
    append_shuffled_epochs(documents_, num_epochs_, rng, owned_document_order_);
  }

  // Walk the document order, seq_length + 1 tokens per sample; a sample ends at the
  // token where the next one starts.
  const std::int64_t num_built = (num_epochs_ * tokens_per_epoch_ - 1) / seq_length_;
  owned_sample_starts_.reserve(static_cast<std::size_t>(num_built) + 1);
  std::int64_t position = 0;
  std::int64_t offset = 0;
  owned_sample_starts_.push_back({0, 0, 0});
  for (std::int64_t sample = 0; sample < num_built; ++sample) {
    std::int64_t remaining = seq_length_ + 1;
    while (remaining != 0) {
      const std::int64_t available = sizes[owned_document_order_[position]] - offset;
      remaining -= available;
      if (remaining <= 0) {
        offset += remaining + available - 1;
        remaining = 0;
      } else {
        ++position;
        offset = 0;
      }
    }
    owned_sample_starts_.push_back({position, static_cast<std::int32_t>(offset), 0});
  }

  const std::int64_t shuffled_together = separate_last_epoch ? samples_before_last_epoch : num_built;
  owned_shuffle_order_.reserve(static_cast<std::size_t>(num_built));
  append_shuffled_range(0, shuffled_together, rng, owned_shuffle_order_);
  append_shuffled_range(shuffled_together, num_built, rng, owned_shuffle_order_);
  document_order_ = owned_document_order_;
  sample_starts_ = owned_sample_starts_;
  shuffle_order_ = owned_shuffle_order_;
}

void GptDataset::read_sample(std::int64_t index, std::span<std::int32_t> out) const {
  ADAMANT_CHECK(index >= 0 && index < size(), "GptDataset {}: sample {} out of range (it has {})", name_, index,
                size());
  ADAMANT_CHECK(out.size() == static_cast<std::size_t>(seq_length_) + 1,
                "GptDataset {}: output holds {} tokens, a sample has seq_length + 1 = {}", name_, out.size(),
                seq_length_ + 1);
  const auto shuffled = static_cast<std::size_t>(shuffle_order_[static_cast<std::size_t>(index)]);
  const SampleStart first = sample_starts_[shuffled];
  const SampleStart last = sample_starts_[shuffled + 1];
  const auto sizes = data_->sizes();
  std::size_t written = 0;
  std::size_t offset = static_cast<std::size_t>(first.offset);
  for (std::int64_t position = first.document_position; position < last.document_position; ++position) {
    const auto doc = static_cast<std::size_t>(document_order_[static_cast<std::size_t>(position)]);
    const std::size_t count = static_cast<std::size_t>(sizes[doc]) - offset;
    ADAMANT_CHECK(written + count <= out.size(), "GptDataset {}: sample {} index is inconsistent", name_, index);
    data_->read_tokens(doc, offset, out.subspan(written, count));
    written += count;
    offset = 0;
  }
  // The last document contributes up to and including the next sample's first token.
  const auto doc = static_cast<std::size_t>(document_order_[static_cast<std::size_t>(last.document_position)]);
  const std::size_t count = static_cast<std::size_t>(last.offset) + 1 - offset;
  ADAMANT_CHECK(written + count == out.size(), "GptDataset {}: sample {} index is inconsistent", name_, index);
  data_->read_tokens(doc, offset, out.subspan(written, count));
}

}  // namespace adamant::data
