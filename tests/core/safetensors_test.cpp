#include "adamant/core/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "adamant/core/error.h"
#include "support/test_data.h"

namespace adamant {
namespace {

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A file from a header text and data bytes, laid out by hand as the format's description says.
std::filesystem::path write_raw(const std::filesystem::path& path, const std::string& header, const std::string& data,
                                std::uint64_t header_length_field) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((header_length_field >> (8 * i)) & 0xff));
  out << header << data;
  return path;
}
std::filesystem::path write_raw(const std::filesystem::path& path, const std::string& header, const std::string& data) {
  return write_raw(path, header, data, header.size());
}

void expect_error_mentioning(const std::filesystem::path& path, const std::vector<std::string>& words) {
  try {
    SafetensorsReader reader(path);
    FAIL() << "no error for " << path;
  } catch (const Error& e) {
    for (const auto& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
  }
}

TEST(Safetensors, WritesTheDocumentedLayoutByteForByte) {
  const auto dir = testing::temp_dir("safetensors_layout");
  const std::vector<float> a = {1.0f, -2.0f};
  const std::vector<std::uint16_t> b = {0x3f80};  // bf16 1.0
  SafetensorsWriter w;
  w.add("a", a.data(), DType::f32, {2});
  w.add("b", b.data(), DType::bf16, {1, 1});
  w.metadata()["format"] = "pt";
  w.write(dir / "x.safetensors");
  std::string header = R"({"__metadata__":{"format":"pt"},"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},)"
                       R"("b":{"data_offsets":[8,10],"dtype":"BF16","shape":[1,1]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data(10, '\0');
  std::memcpy(data.data(), a.data(), 8);
  std::memcpy(data.data() + 8, b.data(), 2);
  write_raw(dir / "expected.safetensors", header, data);
  EXPECT_EQ(file_bytes(dir / "x.safetensors"), file_bytes(dir / "expected.safetensors"));
  EXPECT_EQ((8 + header.size()) % 8, 0u);
}

TEST(Safetensors, RoundTripsTensorsAndMetadata) {
  const auto dir = testing::temp_dir("safetensors_round_trip");
  std::vector<double> a(30);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = 0.5 * static_cast<double>(i) - 3.0;
  const std::vector<std::int32_t> b = {7, -8, 9};
  SafetensorsWriter w;
  w.add("z.weight", a.data(), DType::f64, {5, 6});
  w.add("a.bias", b.data(), DType::i32, {3});
  w.add("empty", nullptr, DType::f32, {0});
  w.metadata()["note"] = "x";
  w.write(dir / "m.safetensors");
  SafetensorsReader r(dir / "m.safetensors");
  EXPECT_EQ(r.metadata().at("note"), "x");
  ASSERT_EQ(r.entries().size(), 3u);
  EXPECT_EQ(r.entries()[0].name, "z.weight");  // data order = order added
  EXPECT_EQ(r.entry("z.weight").shape, (std::vector<std::int64_t>{5, 6}));
  EXPECT_EQ(r.entry("a.bias").dtype, DType::i32);
  const auto bytes = r.read("z.weight");
  std::vector<double> a2(30);
  std::memcpy(a2.data(), bytes.data(), bytes.size());
  EXPECT_EQ(a2, a);
  const auto bias = r.read("a.bias");
  std::vector<std::int32_t> b2(3);
  std::memcpy(b2.data(), bias.data(), bias.size());
  EXPECT_EQ(b2, b);
  EXPECT_TRUE(r.read("empty").empty());
  EXPECT_EQ(r.find("missing"), nullptr);
  EXPECT_THROW(r.entry("missing"), Error);
}

TEST(Safetensors, RejectsDamagedFilesNamingTheProblem) {
  const auto dir = testing::temp_dir("safetensors_damaged");
  const std::string eight(8, 'x');
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  // Sound file first, so the failures below are the damage alone.
  EXPECT_NO_THROW(SafetensorsReader(write_raw(dir / "ok", ok, eight)));

  {
    std::ofstream(dir / "short", std::ios::binary) << "abc";
    expect_error_mentioning(dir / "short", {"truncated", "8-byte"});
  }
  expect_error_mentioning(write_raw(dir / "long_header", ok, eight, 5000), {"header length 5000"});
  expect_error_mentioning(write_raw(dir / "not_json", "{\"w\": [", eight), {"bad header"});
  expect_error_mentioning(write_raw(dir / "truncated", ok, "1234"), {"'w'", "data_offsets", "truncated"});
  expect_error_mentioning(write_raw(dir / "dtype", R"({"w":{"dtype":"F8","shape":[2],"data_offsets":[0,8]}})", eight),
                          {"'w'", "dtype"});
  expect_error_mentioning(write_raw(dir / "no_shape", R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", eight),
                          {"'w'", "shape"});
  expect_error_mentioning(
      write_raw(dir / "size", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight + "1234"),
      {"'w'", "need 12"});
  expect_error_mentioning(
      write_raw(dir / "reversed", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", eight),
      {"'w'", "begin is after end"});
  expect_error_mentioning(write_raw(dir / "overlap",
                                    R"({"u":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("v":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                    eight + "1234"),
                          {"'u'", "'v'", "overlap"});
  expect_error_mentioning(
      write_raw(dir / "meta", R"({"__metadata__":{"k":1},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                eight),
      {"__metadata__.k"});
  expect_error_mentioning(dir / "absent", {"cannot open"});
  expect_error_mentioning(dir, {"not a regular file"});
}

TEST(Safetensors, RejectedFilesAreClosed) {
  const auto dir = testing::temp_dir("safetensors_descriptors");
  write_raw(dir / "truncated", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234");
  const std::size_t before = testing::open_file_descriptors();
  for (int i = 0; i < 100; ++i) EXPECT_THROW(SafetensorsReader(dir / "truncated"), Error);
  EXPECT_EQ(testing::open_file_descriptors(), before);
}

}  // namespace
}  // namespace adamant
