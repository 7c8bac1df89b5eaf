// StepGraph's recording in stretches between pauses, driven by a stand-in recorder whose
// "kernels" are names: what runs is the log, so a direct run, the recording run and the
// replays must log the same names in the same order.
#include "adamant/core/step_graph.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "adamant/core/error.h"

namespace adamant {
namespace {

class NameRecorder final : public GraphRecorder {
 public:
  bool begin(void* stream) override {
    EXPECT_EQ(stream, &stream_token);
    EXPECT_FALSE(recording) << "begin() while recording";
    if (!can_record) return false;
    recording = true;
    captured.clear();
    return true;
  }
  void* end(void*) override {
    EXPECT_TRUE(recording) << "end() without begin()";
    recording = false;
    if (fail_next_end) fail("the recording broke");
    if (captured.empty()) return nullptr;
    graphs.push_back(captured);
    return reinterpret_cast<void*>(graphs.size());  // NOLINT(performance-no-int-to-ptr): a handle
  }
  void launch(void* graph, void*) override {
    ++launches;
    for (const std::string& name : graphs.at(reinterpret_cast<std::size_t>(graph) - 1)) ran.push_back(name);
  }
  void destroy(void*) noexcept override { ++destroyed; }

  // A kernel launch on the stream: recorded while recording, else run.
  void issue(const std::string& name) { (recording ? captured : ran).push_back(name); }

  int stream_token = 0;
  bool can_record = true;
  bool fail_next_end = false;
  bool recording = false;
  std::vector<std::string> captured;
  std::vector<std::vector<std::string>> graphs;
  std::vector<std::string> ran;
  int launches = 0;
  int destroyed = 0;
};

// Kernels a, b, c, d with pauses between them, none at the start and two in a row after a.
StepGraph::Work kernels_and_pauses(NameRecorder& recorder) {
  return [&recorder](const StepGraph::Pause& pause) {
    recorder.issue("a");
    pause();
    pause();
    recorder.issue("b");
    recorder.issue("c");
    pause();
    recorder.issue("d");
  };
}

// The host's part of pause k: a launch of its own (as a collective's ordering event is), which
// must run between the graphs and never be recorded into one.
StepGraph::OnPause host_work(NameRecorder& recorder) {
  return [&recorder](int k) { recorder.issue("pause " + std::to_string(k)); };
}

const std::vector<std::string> kDirectLog = {"a", "pause 0", "pause 1", "b", "c", "pause 2", "d"};

TEST(StepGraph, RecordsOneGraphPerStretchBetweenPausesAndReplaysTheDirectOrder) {
  NameRecorder recorder;
  StepGraph graph(recorder, &recorder.stream_token);
  for (int run = 0; run < 4; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    recorder.ran.clear();
    graph.run(kernels_and_pauses(recorder), host_work(recorder));
    EXPECT_EQ(recorder.ran, kDirectLog);
    EXPECT_EQ(graph.recorded(), run >= 1);
  }
  // Run 1 recorded {a}, {b, c} and {d} (the two pauses after a end one graph) and launched
  // them; runs 2 and 3 launched the same three.
  const std::vector<std::vector<std::string>> expected = {{"a"}, {"b", "c"}, {"d"}};
  EXPECT_EQ(recorder.graphs, expected);
  EXPECT_EQ(graph.graphs(), 3);
  EXPECT_EQ(recorder.launches, 9);
  EXPECT_FALSE(recorder.recording);
}

TEST(StepGraph, APauseBeforeAnyKernelIsReportedFirst) {
  NameRecorder recorder;
  StepGraph graph(recorder, &recorder.stream_token);
  auto work = [&](const StepGraph::Pause& pause) {
    pause();
    recorder.issue("a");
  };
  for (int run = 0; run < 3; ++run) {
    recorder.ran.clear();
    graph.run(work, host_work(recorder));
    EXPECT_EQ(recorder.ran, (std::vector<std::string>{"pause 0", "a"})) << "run " << run;
  }
  EXPECT_EQ(graph.graphs(), 1);
}

TEST(StepGraph, WorkWithoutPausesIsOneGraphAndAMissingOnPauseIsSkipped) {
  NameRecorder recorder;
  StepGraph graph(recorder, &recorder.stream_token);
  for (int run = 0; run < 3; ++run) {
    recorder.ran.clear();
    graph.run([&] {
      recorder.issue("x");
      recorder.issue("y");
    });
    EXPECT_EQ(recorder.ran, (std::vector<std::string>{"x", "y"})) << "run " << run;
  }
  EXPECT_EQ(graph.graphs(), 1);
  // Pauses without host work: the stretches are still kept apart, and nothing else runs.
  StepGraph paused(recorder, &recorder.stream_token);
  for (int run = 0; run < 3; ++run) {
    recorder.ran.clear();
    paused.run(kernels_and_pauses(recorder));
    EXPECT_EQ(recorder.ran, (std::vector<std::string>{"a", "b", "c", "d"})) << "run " << run;
  }
  EXPECT_EQ(paused.graphs(), 3);
}

TEST(StepGraph, AStreamThatCannotBeRecordedRunsDirectly) {
  NameRecorder recorder;
  recorder.can_record = false;
  StepGraph graph(recorder, &recorder.stream_token);
  for (int run = 0; run < 3; ++run) {
    recorder.ran.clear();
    graph.run(kernels_and_pauses(recorder), host_work(recorder));
    EXPECT_EQ(recorder.ran, kDirectLog) << "run " << run;
  }
  EXPECT_FALSE(graph.recorded());
  EXPECT_EQ(recorder.launches, 0);
}

TEST(StepGraph, AFailedRecordingDropsItsGraphsReportsTheErrorAndLaterRunsAreDirect) {
  NameRecorder recorder;
  StepGraph graph(recorder, &recorder.stream_token);
  graph.run(kernels_and_pauses(recorder), host_work(recorder));  // direct
  // The recording breaks at the second stretch's end: the first graph has run, so the step
  // cannot be redone directly and the error is reported.
  int pauses_seen = 0;
  auto work = [&](const StepGraph::Pause& pause) {
    recorder.issue("a");
    pause();
    recorder.issue("b");
    recorder.fail_next_end = true;
    pause();
  };
  EXPECT_THROW(graph.run(work, [&](int) { ++pauses_seen; }), Error);
  recorder.fail_next_end = false;
  EXPECT_EQ(pauses_seen, 1);
  EXPECT_FALSE(recorder.recording);
  EXPECT_FALSE(graph.recorded());
  EXPECT_EQ(recorder.destroyed, 1);  // the graph of {a}
  recorder.ran.clear();
  graph.run(kernels_and_pauses(recorder), host_work(recorder));
  EXPECT_EQ(recorder.ran, kDirectLog);
  EXPECT_FALSE(graph.recorded());

  // Work that throws while it is recorded: the open recording is ended, nothing is kept.
  StepGraph throwing(recorder, &recorder.stream_token);
  auto bad = [&](const StepGraph::Pause& pause) {
    recorder.issue("a");
    pause();
    throw std::runtime_error("bad work");
  };
  EXPECT_THROW(throwing.run(bad), std::runtime_error);  // direct
  EXPECT_THROW(throwing.run(bad), std::runtime_error);  // recording
  EXPECT_FALSE(recorder.recording);
  EXPECT_FALSE(throwing.recorded());
  EXPECT_EQ(recorder.destroyed, 2);
}

TEST(StepGraph, TheCpuRunsEveryPassDirectly) {
  Stream cpu;
  StepGraph graph(cpu);
  std::vector<std::string> ran;
  for (int run = 0; run < 3; ++run) {
    ran.clear();
    graph.run(
        [&](const StepGraph::Pause& pause) {
          ran.push_back("a");
          pause();
          ran.push_back("b");
        },
        [&](int k) { ran.push_back("pause " + std::to_string(k)); });
    EXPECT_EQ(ran, (std::vector<std::string>{"a", "pause 0", "b"}));
  }
  EXPECT_FALSE(graph.recorded());
}

}  // namespace
}  // namespace adamant
