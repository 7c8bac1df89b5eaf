#include "adamant/core/safetensors.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <nlohmann/json.hpp>

#include "adamant/core/atomic_file.h"
#include "adamant/core/error.h"

namespace adamant {

// Tensor data and the header length are stored as they lie in memory.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit
constexpr const char* kMetadataKey = "__metadata__";
constexpr DType kDTypes[] = {DType::f64, DType::f32, DType::bf16, DType::f16,
                             DType::i64, DType::i32, DType::u16,  DType::u8};

// numel * element size; `overflow` tells whether that does not fit in 64 bits.
std::uint64_t checked_bytes(const std::vector<std::int64_t>& shape, DType dtype, bool& overflow) {
  std::uint64_t count = 1;
  overflow = false;
  for (const std::int64_t d : shape) {
    const auto dim = static_cast<std::uint64_t>(d);
    if (dim != 0 && count > std::numeric_limits<std::uint64_t>::max() / dim) overflow = true;
    count *= dim;
  }
  if (count > std::numeric_limits<std::uint64_t>::max() / dtype_size(dtype)) overflow = true;
  return count * dtype_size(dtype);
}

}  // namespace

std::size_t SafetensorsEntry::numel() const {
  std::size_t n = 1;
  for (const std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::string safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f64:
      return "F64";
    case DType::f32:
      return "F32";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    case DType::i64:
      return "I64";
    case DType::i32:
      return "I32";
    case DType::u16:
      return "U16";
    case DType::u8:
      return "U8";
  }
  return "?";
}

void SafetensorsWriter::add(const std::string& name, const void* data, DType dtype, std::vector<std::int64_t> shape) {
  ADAMANT_CHECK(name != kMetadataKey && !name.empty(), "safetensors: invalid tensor name '{}'", name);
  for (const Pending& t : tensors_) {
    ADAMANT_CHECK(t.entry.name != name, "safetensors: tensor '{}' added twice", name);
  }
  for (const std::int64_t d : shape) ADAMANT_CHECK(d >= 0, "safetensors: tensor '{}' has a negative dimension", name);
  bool overflow = false;
  const std::uint64_t bytes = checked_bytes(shape, dtype, overflow);
  ADAMANT_CHECK(!overflow, "safetensors: tensor '{}' is too large", name);
  Pending t;
  t.entry = {name, dtype, std::move(shape), data_bytes_, data_bytes_ + bytes};
  t.data = data;
  data_bytes_ += bytes;
  tensors_.push_back(std::move(t));
}

void SafetensorsWriter::write(const std::filesystem::path& path) const {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata_.empty()) header[kMetadataKey] = metadata_;
  for (const Pending& t : tensors_) {
    header[t.entry.name] = {{"dtype", safetensors_dtype_name(t.entry.dtype)},
                            {"shape", t.entry.shape},
                            {"data_offsets", {t.entry.begin, t.entry.end}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  const std::uint64_t header_bytes = text.size();
  AtomicFileWriter file(path, "safetensors file");
  file.write(&header_bytes, sizeof(header_bytes));
  file.write(text);
  for (const Pending& t : tensors_) file.write(t.data, t.entry.end - t.entry.begin);
  file.commit();
}

SafetensorsReader::SafetensorsReader(std::filesystem::path path)
    : path_(std::move(path)), file_(path_, "safetensors file") {
  const std::string file = path_.string();
  const std::uint64_t size = file_.size();
  std::uint64_t header_bytes = 0;
  if (size < sizeof(header_bytes) || !file_.read_at(0, &header_bytes, sizeof(header_bytes))) {
    fail("safetensors file {} is truncated: it is {} bytes, shorter than the 8-byte header length", file, size);
  }
  if (header_bytes > kMaxHeaderBytes || header_bytes > size - 8) {
    fail("safetensors file {} is truncated or damaged: its header length {} exceeds the {} bytes after it", file,
         header_bytes, size - 8);
  }
  std::string text(header_bytes, '\0');
  ADAMANT_CHECK(file_.read_at(sizeof(header_bytes), text.data(), header_bytes),
                "safetensors file {}: short read of the header", file);
  const auto header = nlohmann::json::parse(text, nullptr, false);
  if (header.is_discarded() || !header.is_object()) {
    fail("safetensors file {} has a bad header: not a JSON object", file);
  }
  data_start_ = 8 + header_bytes;
  const std::uint64_t data_bytes = size - data_start_;
  for (const auto& item : header.items()) {
    // Named references rather than a structured binding: lambdas below capture them.
    const std::string& name = item.key();
    const nlohmann::json& value = item.value();
    if (name == kMetadataKey) {
      ADAMANT_CHECK(value.is_object(), "safetensors file {}: __metadata__ is not an object", file);
      for (const auto& [key, text_value] : value.items()) {
        ADAMANT_CHECK(text_value.is_string(), "safetensors file {}: __metadata__.{} is not a string", file, key);
        metadata_[key] = text_value.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const char* field, const std::string& why) {
      fail("safetensors file {}: tensor '{}' has a bad '{}' ({}): {}", file, name, field,
           value.contains(field) ? value[field].dump() : "absent", why);
    };
    if (!value.is_object()) bad("dtype", "the tensor's entry is not an object");
    SafetensorsEntry e;
    e.name = name;
    const auto dtype = value.find("dtype");
    if (dtype == value.end() || !dtype->is_string()) bad("dtype", "expected a string such as \"F32\"");
    const auto known = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                    [&](DType t) { return safetensors_dtype_name(t) == dtype->get<std::string>(); });
    if (known == std::end(kDTypes)) bad("dtype", "Adamant reads F64, F32, BF16, F16, I64, I32, U16 and U8");
    e.dtype = *known;
    const auto shape = value.find("shape");
    if (shape == value.end() || !shape->is_array()) bad("shape", "expected a list of dimensions");
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned()) bad("shape", "dimensions are non-negative integers");
      e.shape.push_back(d.get<std::int64_t>());
    }
    const auto offsets = value.find("data_offsets");
    if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned()) {
      bad("data_offsets", "expected [begin, end] byte offsets");
    }
    e.begin = (*offsets)[0].get<std::uint64_t>();
    e.end = (*offsets)[1].get<std::uint64_t>();
    if (e.begin > e.end) bad("data_offsets", "begin is after end");
    if (e.end > data_bytes) {
      bad("data_offsets", fmt::format("the data section holds {} bytes; the file is truncated", data_bytes));
    }
    bool overflow = false;
    const std::uint64_t expected = checked_bytes(e.shape, e.dtype, overflow);
    if (overflow || expected != e.end - e.begin) {
      bad("data_offsets", fmt::format("{} bytes, but the dtype and shape need {}", e.end - e.begin, expected));
    }
    entries_.push_back(std::move(e));
  }
  std::sort(entries_.begin(), entries_.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < entries_.size(); ++i) {
    ADAMANT_CHECK(entries_[i].begin >= entries_[i - 1].end,
                  "safetensors file {}: tensors '{}' and '{}' overlap (bytes {}..{} and {}..{})", file,
                  entries_[i - 1].name, entries_[i].name, entries_[i - 1].begin, entries_[i - 1].end, entries_[i].begin,
                  entries_[i].end);
  }
}

const SafetensorsEntry* SafetensorsReader::find(const std::string& name) const {
  for (const SafetensorsEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

const SafetensorsEntry& SafetensorsReader::entry(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr) fail("safetensors file {} has no tensor '{}'", path_.string(), name);
  return *e;
}

std::vector<std::uint8_t> SafetensorsReader::read(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  std::vector<std::uint8_t> out(e.end - e.begin);
  const std::uint64_t at = data_start_ + e.begin;
  ADAMANT_CHECK(file_.read_at(at, out.data(), out.size()),
                "safetensors file {}: short read of tensor '{}'; the file is truncated", path_.string(), name);
  return out;
}

}  // namespace adamant
