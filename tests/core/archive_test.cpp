#include "adamant/core/archive.h"

#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "adamant/core/crc32c.h"
#include "adamant/core/error.h"
#include "support/test_data.h"

namespace adamant {
namespace {

TEST(Archive, RoundTripAndMetadata) {
  const auto dir = testing::temp_dir("archive");
  std::vector<float> a = {1.5f, -2.0f, 3.25f};
  std::vector<std::int32_t> b(1000);
  for (int i = 0; i < 1000; ++i) b[i] = i * 7 - 3;
  {
    ArchiveWriter w(dir / "x.adm");
    w.add("a", a.data(), DType::f32, {3});
    w.add("b", b.data(), DType::i32, {10, 100});
    w.meta()["step"] = 42;
    EXPECT_FALSE(std::filesystem::exists(dir / "x.adm"));  // only the temporary exists before commit
    w.commit();
  }
  ArchiveReader r(dir / "x.adm");
  EXPECT_EQ(r.meta()["step"], 42);
  EXPECT_EQ(r.entry("b").shape, (std::vector<std::int64_t>{10, 100}));
  std::vector<float> a2(3);
  r.read("a", a2.data(), a2.size() * 4);
  EXPECT_EQ(a2, a);
  std::vector<std::int32_t> b2(1000);
  r.read("b", b2.data(), b2.size() * 4);
  EXPECT_EQ(b2, b);
  EXPECT_THROW(r.entry("c"), Error);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u);  // no temporary left behind
}

TEST(Archive, UncommittedWriterLeavesNothing) {
  const auto dir = testing::temp_dir("archive-abort");
  {
    ArchiveWriter w(dir / "y.adm");
    float x = 1;
    w.add("x", &x, DType::f32, {1});
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(Archive, DetectsCorruptionAndTruncation) {
  const auto dir = testing::temp_dir("archive-corrupt");
  std::vector<float> a(256, 0.5f);
  {
    ArchiveWriter w(dir / "z.adm");
    w.add("weights", a.data(), DType::f32, {256});
    w.commit();
  }
  {  // flip one byte inside the tensor data
    std::fstream f(dir / "z.adm", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64 + 100);
    f.put('\x7f');
  }
  ArchiveReader r(dir / "z.adm");
  try {
    r.read("weights", a.data(), a.size() * 4);
    FAIL() << "corruption not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch in tensor 'weights'"), std::string::npos) << e.what();
  }
  std::filesystem::resize_file(dir / "z.adm", 500);
  try {
    ArchiveReader truncated(dir / "z.adm");
    FAIL() << "truncation not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("z.adm is damaged"), std::string::npos) << e.what();
  }
}

// An archive laid out by hand as archive.h describes it, around any header text, with a correct
// header checksum: the reader's checks past the checksum see exactly this header.
std::filesystem::path write_archive(const std::filesystem::path& path, const std::string& header) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << "ADMARCH1" << header;
  const std::uint64_t bytes = header.size();
  const std::uint32_t crc = crc32c(header.data(), header.size());
  out.write(reinterpret_cast<const char*>(&bytes), sizeof(bytes));
  out.write(reinterpret_cast<const char*>(&crc), sizeof(crc));
  out << "ADMAREND";
  return path;
}

void expect_damaged(const std::filesystem::path& path, const std::string& detail) {
  try {
    ArchiveReader reader(path);
    FAIL() << path << ": damage not detected";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path.filename().string() + " is damaged"), std::string::npos) << message;
    EXPECT_NE(message.find(detail), std::string::npos) << message;
  }
}

TEST(Archive, WellFramedHeadersOfTheWrongShapeAreDamage) {
  const auto dir = testing::temp_dir("archive-header");
  const std::string entry = R"({"name":"w","dtype":"fp32","shape":[2],"offset":8,"bytes":8,"crc32c":0})";
  expect_damaged(write_archive(dir / "array.adm", "[1,2]"), "not valid JSON");
  expect_damaged(write_archive(dir / "number.adm", R"({"tensors":7})"), "not valid JSON");
  expect_damaged(write_archive(dir / "no_name.adm", R"({"tensors":[{"dtype":"fp32"}]})"), "name");
  expect_damaged(write_archive(dir / "text_size.adm", R"({"tensors":[{"name":"w","dtype":"fp32","shape":[2],)"
                                                      R"("offset":8,"bytes":"8","crc32c":0}]})"),
                 "bytes");
  // offset + bytes wraps around 2^64: still outside the file.
  expect_damaged(write_archive(dir / "wrap.adm", R"({"tensors":[{"name":"w","dtype":"fp32","shape":[2],)"
                                                 R"("offset":18446744073709551615,"bytes":2,"crc32c":0}]})"),
                 "outside the file");
  expect_damaged(write_archive(dir / "past_end.adm", R"({"tensors":[)" + entry + "]}"), "outside the file");
}

TEST(Archive, RejectedFilesAreClosed) {
  const auto dir = testing::temp_dir("archive-descriptors");
  std::ofstream(dir / "short.adm", std::ios::binary) << "ADMARCH1 and nothing else of an archive";
  write_archive(dir / "bad_json.adm", "{");
  const std::size_t before = testing::open_file_descriptors();
  for (int i = 0; i < 100; ++i) {
    EXPECT_THROW(ArchiveReader(dir / "short.adm"), Error);
    EXPECT_THROW(ArchiveReader(dir / "bad_json.adm"), Error);
  }
  EXPECT_EQ(testing::open_file_descriptors(), before);
}

TEST(Archive, AFolderIsNotACheckpointFile) {
  const auto dir = testing::temp_dir("archive-folder");
  try {
    ArchiveReader reader(dir);
    FAIL() << "a folder was read as a checkpoint file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace adamant
