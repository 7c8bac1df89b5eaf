// The pipeline schedules against a simulation of the pipeline they drive: every stage runs
// its passes in the schedule's order, a pass starts when its inputs exist (the previous
// virtual stage's forward of that micro-batch; the next virtual stage's backward and this
// pass's own forward) and the stage is free. The simulation must finish (no stage waits on a
// pass that waits on it), run every pass once, and its idle time must be the closed-form
// bubble: (p - 1) forward+backward times per step for 1F1B, 1/v of that interleaved.
#include "adamant/train/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "adamant/core/error.h"

namespace adamant::train {
namespace {

struct Simulation {
  bool finished = false;
  double makespan = 0;
  std::vector<double> busy;  // per stage
};

// Forward passes take `forward_time` per chunk, backward passes `backward_time`; sends are free.
Simulation simulate(const PipelineLayout& layout, double forward_time, double backward_time) {
  const int p = layout.stages, v = layout.virtual_stages;
  std::vector<std::vector<PipelineStep>> schedules;
  for (int s = 0; s < p; ++s) schedules.push_back(pipeline_schedule(layout, s));
  // Finish times of passes by (pass, micro-batch, virtual stage).
  std::map<std::tuple<PipelinePass, int, int>, double> done;
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free_at(static_cast<std::size_t>(p), 0.0);
  Simulation result;
  result.busy.assign(static_cast<std::size_t>(p), 0.0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      auto& i = next[static_cast<std::size_t>(s)];
      if (i == schedules[static_cast<std::size_t>(s)].size()) continue;
      const PipelineStep& step = schedules[static_cast<std::size_t>(s)][i];
      const int virtual_stage = step.chunk * p + s;
      double ready = free_at[static_cast<std::size_t>(s)];
      auto need = [&](PipelinePass pass, int stage_index) {
        const auto it = done.find({pass, step.micro_batch, stage_index});
        if (it == done.end()) return false;
        ready = std::max(ready, it->second);
        return true;
      };
      bool inputs = true;
      if (step.pass == PipelinePass::forward) {
        if (virtual_stage > 0) inputs = need(PipelinePass::forward, virtual_stage - 1);
      } else {
        inputs = need(PipelinePass::forward, virtual_stage);
        if (inputs && virtual_stage + 1 < p * v) inputs = need(PipelinePass::backward, virtual_stage + 1);
      }
      if (!inputs) continue;
      const double cost = step.pass == PipelinePass::forward ? forward_time : backward_time;
      const bool fresh = done.emplace(std::make_tuple(step.pass, step.micro_batch, virtual_stage), ready + cost).second;
      EXPECT_TRUE(fresh) << "stage " << s << " runs " << to_string(step) << " twice";
      free_at[static_cast<std::size_t>(s)] = ready + cost;
      result.busy[static_cast<std::size_t>(s)] += cost;
      result.makespan = std::max(result.makespan, ready + cost);
      ++i;
      progress = true;
    }
  }
  result.finished = true;
  for (int s = 0; s < p; ++s)
    result.finished &= next[static_cast<std::size_t>(s)] == schedules[static_cast<std::size_t>(s)].size();
  return result;
}

TEST(PipelineSchedule, EveryPassOnceAndEachBackwardAfterItsForward) {
  for (const PipelineLayout layout : {PipelineLayout{1, 1, 3}, PipelineLayout{2, 1, 2}, PipelineLayout{4, 1, 7},
                                      PipelineLayout{4, 2, 8}, PipelineLayout{2, 3, 6}, PipelineLayout{4, 2, 4}}) {
    for (int s = 0; s < layout.stages; ++s) {
      std::set<std::tuple<int, int>> forwards, backwards;
      for (const PipelineStep& step : pipeline_schedule(layout, s)) {
        const auto key = std::make_tuple(step.micro_batch, step.chunk);
        if (step.pass == PipelinePass::forward) {
          EXPECT_TRUE(forwards.insert(key).second) << to_string(step);
        } else {
          EXPECT_TRUE(forwards.contains(key)) << to_string(step) << " before its forward";
          EXPECT_TRUE(backwards.insert(key).second) << to_string(step);
        }
      }
      EXPECT_EQ(forwards.size(), static_cast<std::size_t>(layout.micro_batches * layout.virtual_stages));
      EXPECT_EQ(backwards.size(), forwards.size());
    }
  }
}

// 4 stages, 6 micro-batches: the textbook 1F1B order of the first and last stage.
TEST(PipelineSchedule, OneForwardOneBackwardOrder) {
  const PipelineLayout layout{4, 1, 6};
  auto names = [&](int stage) {
    std::vector<std::string> out;
    for (const PipelineStep& step : pipeline_schedule(layout, stage)) out.push_back(to_string(step));
    return out;
  };
  const auto f = [](int mb) { return to_string({PipelinePass::forward, mb, 0}); };
  const auto b = [](int mb) { return to_string({PipelinePass::backward, mb, 0}); };
  EXPECT_EQ(names(0),
            (std::vector<std::string>{f(0), f(1), f(2), f(3), b(0), f(4), b(1), f(5), b(2), b(3), b(4), b(5)}));
  EXPECT_EQ(names(3),
            (std::vector<std::string>{f(0), b(0), f(1), b(1), f(2), b(2), f(3), b(3), f(4), b(4), f(5), b(5)}));
  for (int s = 0; s < 4; ++s) EXPECT_EQ(peak_passes_in_flight(layout, s), 4 - s);
}

TEST(PipelineSchedule, OneForwardOneBackwardBubbleIsTheClosedForm) {
  for (const int p : {2, 3, 4, 8}) {
    for (const int m : {p, p + 1, 2 * p, 4 * p + 3}) {
      const PipelineLayout layout{p, 1, m};
      const double forward = 1.0, backward = 2.0;
      const Simulation run = simulate(layout, forward, backward);
      ASSERT_TRUE(run.finished) << "p " << p << " m " << m << " deadlocks";
      // Ideal: m (forward + backward); idle (p - 1)(forward + backward).
      const double ideal = m * (forward + backward);
      EXPECT_DOUBLE_EQ(run.makespan, ideal + (p - 1) * (forward + backward)) << "p " << p << " m " << m;
      EXPECT_DOUBLE_EQ((run.makespan - ideal) / ideal, pipeline_bubble_fraction(layout));
    }
  }
}

TEST(PipelineSchedule, InterleavingDividesTheBubbleByTheChunks) {
  for (const int p : {2, 4}) {
    for (const int v : {2, 3}) {
      for (const int m : {p, 2 * p, 4 * p}) {
        const PipelineLayout layout{p, v, m};
        const Simulation run = simulate(layout, 1.0, 1.0);
        ASSERT_TRUE(run.finished) << "p " << p << " v " << v << " m " << m << " deadlocks";
        const double ideal = m * v * 2.0;
        for (const double busy : run.busy) EXPECT_DOUBLE_EQ(busy, ideal);
        // With m == p every forward comes first (Megatron's order for that case); otherwise the
        // warm-up overlaps as in 1F1B and the bubble is (p - 1) / (m v).
        if (m > p) {
          EXPECT_DOUBLE_EQ((run.makespan - ideal) / ideal, pipeline_bubble_fraction(layout));
        }
        EXPECT_LE(run.makespan, ideal * (1.0 + 2.0 * pipeline_bubble_fraction(layout)) + 1e-9);
      }
    }
  }
}

TEST(PipelineSchedule, RefusesLayoutsThatCannotRun) {
  EXPECT_THROW(check_pipeline_layout({4, 1, 3}), Error);  // fewer micro-batches than stages
  EXPECT_THROW(check_pipeline_layout({4, 2, 6}), Error);  // interleaved: not a multiple of the stages
  EXPECT_THROW(check_pipeline_layout({0, 1, 4}), Error);
  EXPECT_THROW(check_pipeline_layout({2, 0, 4}), Error);
  EXPECT_THROW(pipeline_schedule({2, 1, 4}, 2), Error);
  EXPECT_NO_THROW(check_pipeline_layout({4, 2, 8}));
  try {
    check_pipeline_layout({4, 1, 3});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.global_batch_size"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace adamant::train
