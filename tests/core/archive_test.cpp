#include "adamant/core/archive.h"

#include <gtest/gtest.h>

#include <fstream>
#include <vector>

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

}  // namespace
}  // namespace adamant
