#include "adamant/data/utf8_stream.h"

namespace adamant::data {

namespace {

// Bytes of the sequence that `lead` starts; 0 for a continuation byte, 1 for ASCII or an invalid byte.
std::size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xC0) == 0x80) return 0;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

}  // namespace

std::size_t complete_utf8_prefix(std::string_view bytes) {
  // Only the last three bytes can belong to an unfinished character of at most four.
  const std::size_t size = bytes.size();
  for (std::size_t back = 1; back <= 4 && back <= size; ++back) {
    const std::size_t at = size - back;
    const std::size_t length = sequence_length(static_cast<unsigned char>(bytes[at]));
    if (length == 0) continue;         // a continuation byte: look further back for its lead
    return length > back ? at : size;  // the lead's sequence is cut off, or complete
  }
  return size;  // only continuation bytes at the end: nothing to wait for
}

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  const std::size_t ready = complete_utf8_prefix(pending_);
  std::string out = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

std::string Utf8Stream::finish() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace adamant::data
