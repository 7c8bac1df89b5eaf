#include "adamant/train/run_checkpoints.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "adamant/core/error.h"
#include "adamant/train/checkpoint.h"

namespace adamant::train {

namespace {

// Sends rank 0's `text` to every rank.
void broadcast_text(comm::Communicator& world, std::string& text) {
  std::int64_t size = static_cast<std::int64_t>(text.size());
  world.broadcast(Tensor::flat(&size, DType::i64, Device::cpu(), 1), 0);
  text.resize(static_cast<std::size_t>(size));
  if (size > 0) world.broadcast(Tensor::flat(text.data(), DType::u8, Device::cpu(), text.size()), 0);
}

bool is_leftover(const std::filesystem::path& entry) {
  const std::string name = entry.filename().string();
  if (name.starts_with(kCheckpointFolderPrefix) && name.ends_with(kCheckpointPartialSuffix)) return true;
  const auto tmp = name.rfind(".tmp.");
  return tmp != std::string::npos && tmp + 5 < name.size() &&
         std::all_of(name.begin() + static_cast<std::ptrdiff_t>(tmp + 5), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

std::string join_names(const std::vector<std::filesystem::path>& paths) {
  std::string out;
  for (const auto& p : paths) out += (out.empty() ? "" : ", ") + p.filename().string();
  return out;
}

// Rank 0's plan: "error\n<message>", "fresh\n<run id>\n<warnings...>" or
// "resume\n<explicit 0|1>\n<candidate>...\n\n<warnings...>" (candidates best first).
std::string plan_on_rank0(const TrainConfig& config) {
  const auto dir = config.run_dir() / "checkpoints";
  std::vector<std::string> warnings;
  for (const auto& folder : {config.run_dir(), dir}) {
    for (const auto& removed : remove_interrupted_saves(folder)) {
      warnings.push_back(fmt::format("removed {}, left by an interrupted save", removed.string()));
    }
  }
  const auto all = complete_checkpoints(dir);
  std::vector<std::filesystem::path> candidates;
  bool explicit_checkpoint = false;
  const auto& requested = config.exp_manager.resume_from_checkpoint;
  if (!requested.empty()) {
    candidates.push_back(requested);
    explicit_checkpoint = true;
  } else if (config.exp_manager.resume_if_exists) {
    const auto named = latest_named(dir);
    if (named) {
      if (std::find(all.begin(), all.end(), *named) != all.end()) {
        candidates.push_back(*named);
      } else {
        warnings.push_back(
            fmt::format("{} names {}, which is missing or incomplete; using the newest complete "
                        "checkpoint instead",
                        (dir / "latest").string(), named->string()));
      }
    }
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      if (std::find(candidates.begin(), candidates.end(), *it) == candidates.end()) candidates.push_back(*it);
    }
  }
  std::string plan;
  if (candidates.empty()) {
    if (!all.empty() && !config.exp_manager.overwrite_existing_run) {
      return fmt::format(
          "error\nthe run folder {} already holds checkpoints of an earlier run ({}); a fresh run there would mix "
          "with them. Set exp_manager.resume_if_exists=true to continue that run, choose another exp_manager.name "
          "(or exp_manager.exp_dir), or set exp_manager.overwrite_existing_run=true to delete them and start over",
          config.run_dir().string(), join_names(all));
    }
    for (const auto& old : all) {
      std::filesystem::remove_all(old);
      warnings.push_back(fmt::format("deleted {} (exp_manager.overwrite_existing_run=true)", old.string()));
    }
    std::filesystem::remove(dir / "latest");
    plan = "fresh\n" + new_run_id() + "\n";
  } else {
    plan = fmt::format("resume\n{}\n", explicit_checkpoint ? 1 : 0);
    for (const auto& c : candidates) plan += c.string() + "\n";
    plan += "\n";
  }
  for (const auto& w : warnings) plan += w + "\n";
  return plan;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

}  // namespace

std::vector<std::filesystem::path> remove_interrupted_saves(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> removed;
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) return removed;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (is_leftover(entry.path())) removed.push_back(entry.path());
  }
  std::sort(removed.begin(), removed.end());
  for (const auto& path : removed) std::filesystem::remove_all(path);
  return removed;
}

RunStart prepare_run_start(const TrainConfig& config, comm::Communicator& world) {
  std::string plan;
  if (world.rank() == 0) {
    try {
      plan = plan_on_rank0(config);
    } catch (const std::exception& e) {
      plan = std::string("error\n") + e.what();
    }
  }
  broadcast_text(world, plan);
  const auto lines = lines_of(plan);
  if (lines.at(0) == "error") throw Error(plan.substr(6));

  RunStart start;
  std::size_t next = 1;
  if (lines.at(0) == "fresh") {
    start.run_id = lines.at(next++);
    start.warnings.assign(lines.begin() + static_cast<std::ptrdiff_t>(next), lines.end());
    return start;
  }
  const bool explicit_checkpoint = lines.at(next++) == "1";
  std::vector<std::filesystem::path> candidates;
  while (next < lines.size() && !lines[next].empty()) candidates.emplace_back(lines[next++]);
  start.warnings.assign(lines.begin() + static_cast<std::ptrdiff_t>(next + 1), lines.end());

  // The ranks share the checking of each candidate's files; all agree on the first intact one.
  std::vector<std::filesystem::path> damaged;
  for (const auto& candidate : candidates) {
    const auto damage = find_checkpoint_damage(candidate, world.rank(), world.size());
    std::int32_t bad = damage ? 1 : 0;
    world.all_reduce(Tensor::flat(&bad, DType::i32, Device::cpu(), 1), comm::ReduceOp::sum);
    if (bad == 0) {
      start.checkpoint = candidate;
      break;
    }
    if (damage) std::fprintf(stderr, "warning: %s\n", damage->c_str());
    ADAMANT_CHECK(!explicit_checkpoint,
                  "exp_manager.resume_from_checkpoint={} is damaged or incomplete ({}); name an intact checkpoint "
                  "folder such as <run>/checkpoints/step_00000100",
                  candidate.string(), damage ? *damage : std::string("a file checked by another rank, see above"));
    damaged.push_back(candidate);
    start.warnings.push_back(
        fmt::format("checkpoint {} is damaged (see the warning above); trying an older one", candidate.string()));
  }
  ADAMANT_CHECK(start.checkpoint.has_value(),
                "every checkpoint in {} is damaged ({}); remove the damaged folders, or start over with "
                "exp_manager.overwrite_existing_run=true or another exp_manager.name",
                (config.run_dir() / "checkpoints").string(), join_names(damaged));
  // A checkpoint of this run folder continues its run; one from elsewhere starts a run of its own here.
  const bool ours = start.checkpoint->parent_path() == config.run_dir() / "checkpoints";
  std::string run_id = ours ? checkpoint_run_id(*start.checkpoint) : std::string();
  if (world.rank() == 0 && run_id.empty()) run_id = new_run_id();
  broadcast_text(world, run_id);
  start.run_id = run_id;
  return start;
}

}  // namespace adamant::train
