// The benches' command-line parser (bench/bench_flags.h): values and defaults as given, and
// every kind of mistake ending the program with status 2 and a message that names the flag.
#include "bench_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace adamant::bench {
namespace {

// Flags as a bench's main() sees them, the program's name first.
class CommandLine {
 public:
  explicit CommandLine(std::vector<std::string> args) : args_(std::move(args)) {
    args_.insert(args_.begin(), "bench");
    for (std::string& arg : args_) pointers_.push_back(arg.data());
  }
  int argc() const { return static_cast<int>(pointers_.size()); }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<char*> pointers_;
};

BenchFlags parse(std::vector<std::string> args) {
  CommandLine line(std::move(args));
  return BenchFlags(line.argc(), line.argv(), "bench", "[--reps N] [--dropout P] [--model M] [--json PATH] [--fast]",
                    {"--reps", "--dropout", "--model", "--json"}, {"--fast"});
}

TEST(BenchFlags, ValuesGivenAndDefaultsOtherwise) {
  const BenchFlags given =
      parse({"--reps", "7", "--dropout", "0.25", "--model", "1.3b", "--json", "out.json", "--fast"});
  EXPECT_EQ(given.whole_number("--reps", 20, 1), 7);
  EXPECT_EQ(given.number("--dropout", 0.0, 0.0, 1.0), 0.25);
  EXPECT_EQ(given.one_of("--model", "126m", {"126m", "1.3b", "both"}), "1.3b");
  EXPECT_EQ(given.text("--json", ""), "out.json");
  EXPECT_TRUE(given.switch_given("--fast"));

  const BenchFlags none = parse({});
  EXPECT_EQ(none.whole_number("--reps", 20, 1), 20);
  EXPECT_EQ(none.number("--dropout", 0.0, 0.0, 1.0), 0.0);
  EXPECT_EQ(none.one_of("--model", "126m", {"126m", "1.3b", "both"}), "126m");
  EXPECT_EQ(none.text("--json", ""), "");
  EXPECT_FALSE(none.switch_given("--fast"));
}

TEST(BenchFlags, MistakesInTheCommandLineEndTheProgram) {
  const auto status_2 = ::testing::ExitedWithCode(2);
  EXPECT_EXIT(parse({"--bogus", "1"}), status_2, "bench: --bogus is not a flag this program takes\nusage: bench ");
  EXPECT_EXIT(parse({"--reps"}), status_2, "--reps needs a value");
  EXPECT_EXIT(parse({"--json", "--reps", "5"}), status_2, "--json needs a value");
  EXPECT_EXIT(parse({"--reps", "5", "--reps", "6"}), status_2, "--reps is given twice");
  EXPECT_EXIT(parse({"--fast", "--fast"}), status_2, "--fast is given twice");
  EXPECT_EXIT(parse({"--fast", "1"}), status_2, "1 is not a flag this program takes");
  // A check the bench makes of a value it read ends the same way.
  EXPECT_EXIT(parse({"--model", "x"}).fail("--model x names no config"), status_2,
              "bench: --model x names no config\nusage: bench \\[--reps N\\]");
}

TEST(BenchFlags, ValuesThatAreNotWhatTheFlagTakesEndTheProgram) {
  const auto status_2 = ::testing::ExitedWithCode(2);
  for (const char* bad : {"abc", "0", "1e3", " 5", "5x", "0x10", "-3"}) {
    EXPECT_EXIT(parse({"--reps", bad}).whole_number("--reps", 20, 1), status_2,
                "--reps .* is not a whole number of at least 1")
        << bad;
  }
  EXPECT_EXIT(parse({"--reps", "99999999999"}).whole_number("--reps", 20, 1), status_2, "is out of range");
  for (const char* bad : {"1", "1.5", "-0.1", "nan", "inf", "0.1x", ""}) {
    EXPECT_EXIT(parse({"--dropout", bad}).number("--dropout", 0.0, 0.0, 1.0), status_2,
                "--dropout .* is not a number of at least 0 and below 1")
        << bad;
  }
  EXPECT_EXIT(parse({"--model", "2.7b"}).one_of("--model", "126m", {"126m", "1.3b", "both"}), status_2,
              "--model 2.7b is not 126m, 1.3b or both");
}

TEST(BenchFlags, ListsOfWholeNumbers) {
  EXPECT_EQ(parse({"--reps", "8,16,24"}).whole_numbers("--reps", "4", 1), (std::vector<int>{8, 16, 24}));
  EXPECT_EQ(parse({"--reps", "131"}).whole_numbers("--reps", "4", 1, 131), (std::vector<int>{131}));
  EXPECT_EQ(parse({}).whole_numbers("--reps", "8,16", 1), (std::vector<int>{8, 16}));
  const auto status_2 = ::testing::ExitedWithCode(2);
  for (const char* bad : {"8,,16", "8,x", "0,8", "8,132", "", "8,", ",8", "8 ,16"}) {
    EXPECT_EXIT(parse({"--reps", bad}).whole_numbers("--reps", "4", 1, 131), status_2,
                "--reps .* is not a comma-separated list of whole numbers from 1 to 131")
        << bad;
  }
}

}  // namespace
}  // namespace adamant::bench
