#include "adamant/optim/optimizer_checkpoint.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "adamant/core/archive.h"
#include "adamant/core/error.h"
#include "adamant/core/number_text.h"

namespace adamant::optim {

namespace {

constexpr const char* kMainWeights = "main_weights";
constexpr const char* kExpAvg = "exp_avg";
constexpr const char* kExpAvgSq = "exp_avg_sq";

OptimizerCheckpointInfo info_from_meta(const nlohmann::json& meta, const std::filesystem::path& file) {
  for (const char* key : {"format_version", "optimizer", "step", "loss_scaler", "dp_size", "rank", "file_count",
                          "bucket_cap_mb", "params", "pieces"}) {
    ADAMANT_CHECK(meta.contains(key), "{} is not an Adamant optimizer checkpoint: its meta has no '{}'", file.string(),
                  key);
  }
  const int version = meta.at("format_version").get<int>();
  ADAMANT_CHECK(version == kOptimizerCheckpointVersion,
                "{} has optimizer checkpoint format {}, this Adamant reads format {}; use a matching Adamant",
                file.string(), version, kOptimizerCheckpointVersion);
  OptimizerCheckpointInfo info;
  info.optimizer = meta.at("optimizer").get<std::string>();
  info.step = meta.at("step").get<std::int64_t>();
  info.loss_scaler = meta.at("loss_scaler");
  info.dp_size = meta.at("dp_size").get<int>();
  info.rank = meta.at("rank").get<int>();
  info.file_count = meta.at("file_count").get<int>();
  info.bucket_cap_mb = meta.at("bucket_cap_mb").get<double>();
  return info;
}

constexpr std::size_t kNotHere = ~std::size_t{0};

// For each parameter a file lists, this model's index of the same name (kNotHere when this rank does not
// hold it, or reads it from an earlier stage's folder). Unless the slices are remapped, a name of this
// model must have the same shape there.
std::vector<std::size_t> match_saved_params(const nlohmann::json& meta, const ParamList& params,
                                            const std::unordered_map<std::string, std::size_t>& index_of, int stage,
                                            bool remapped, std::vector<int>& source_stage,
                                            const std::filesystem::path& dir) {
  std::vector<std::size_t> to_mine;
  for (const auto& saved : meta.at("params")) {
    const auto name = saved.at("name").get<std::string>();
    const auto shape = saved.at("shape").get<std::vector<std::int64_t>>();
    const auto found = index_of.find(name);
    if (found == index_of.end()) {
      to_mine.push_back(kNotHere);
      continue;
    }
    const ParamSpec& spec = params[found->second];
    ADAMANT_CHECK(remapped || (shape == spec.shape && saved.at("numel").get<std::size_t>() == spec.numel),
                  "checkpoint {} was written for another model: parameter {} has shape [{}] there, [{}] here",
                  dir.string(), name, fmt::join(shape, ", "), fmt::join(spec.shape, ", "));
    int& source = source_stage[found->second];
    if (source == -1) source = stage;  // a tied copy saved by two stages is read from the first
    to_mine.push_back(source == stage ? found->second : kNotHere);
  }
  return to_mine;
}

std::vector<StatePiece> pieces_from_meta(const nlohmann::json& meta, std::size_t state_numel,
                                         const std::filesystem::path& file) {
  const auto& saved = meta.at("params");
  std::vector<StatePiece> pieces;
  for (const auto& entry : meta.at("pieces")) {
    const auto values = entry.get<std::vector<std::size_t>>();
    ADAMANT_CHECK(values.size() == 4, "{}: a state piece must have 4 numbers", file.string());
    const StatePiece piece{values[0], values[1], values[2], values[3]};
    ADAMANT_CHECK(piece.param < saved.size() &&
                      piece.param_offset + piece.numel <= saved[piece.param].at("numel").get<std::size_t>() &&
                      piece.state_offset + piece.numel <= state_numel,
                  "{} is damaged: state piece [{}, {}, {}, {}] lies outside its parameter or state", file.string(),
                  piece.param, piece.param_offset, piece.state_offset, piece.numel);
    pieces.push_back(piece);
  }
  return pieces;
}

// The r of every optim_rank_<r>.adm in `dir`, ascending.
std::vector<int> present_shard_indices(const std::filesystem::path& dir) {
  std::vector<int> indices;
  if (!std::filesystem::is_directory(dir)) return indices;
  constexpr std::string_view kPrefix = "optim_rank_", kSuffix = ".adm";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) || !name.ends_with(kSuffix)) {
      continue;
    }
    const std::string_view digits(name.data() + kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
    const std::optional<int> index = number_from_text<int>(digits);
    if (index && *index >= 0) indices.push_back(*index);
  }
  std::sort(indices.begin(), indices.end());
  return indices;
}

// This rank's state arrays and its pieces by parameter: where the elements of a saved
// file's pieces go, and how many have arrived.
class StateTargets {
 public:
  StateTargets(const ParamList& params, std::span<const StatePiece> pieces, std::span<float> main_weights,
               std::span<float> exp_avg, std::span<float> exp_avg_sq)
      : mine_(params.size()), main_weights_(main_weights), exp_avg_(exp_avg), exp_avg_sq_(exp_avg_sq) {
    for (const StatePiece& piece : pieces) {
      ADAMANT_CHECK(piece.param < params.size() && piece.state_offset + piece.numel <= main_weights.size() &&
                        main_weights.size() == exp_avg.size() && exp_avg.size() == exp_avg_sq.size(),
                    "read_optimizer_state: a piece lies outside the state arrays");
      mine_[piece.param].push_back(&piece);
      wanted_ += piece.numel;
    }
  }

  bool holds(std::size_t param) const { return !mine_[param].empty(); }
  std::size_t wanted() const { return wanted_; }
  std::size_t copied() const { return copied_; }

  // Copies the state of one saved file into the pieces it overlaps. to_mine maps the file's
  // parameters to this model's (kNotHere: not read from this file); with a remap (another
  // tensor-parallel size) elements are placed one by one.
  void copy_file(const ArchiveReader& reader, const std::filesystem::path& file, std::span<const std::size_t> to_mine,
                 const SavedState& saved, int split_rank) {
    const std::size_t old_numel = reader.entry(kMainWeights).bytes / sizeof(float);
    const std::vector<StatePiece> old_pieces = pieces_from_meta(reader.meta(), old_numel, file);
    auto targets_of = [&](const StatePiece& old) -> const std::vector<const StatePiece*>* {
      const std::size_t p = old.param < to_mine.size() ? to_mine[old.param] : kNotHere;
      return p == kNotHere || mine_[p].empty() ? nullptr : &mine_[p];
    };
    if (std::none_of(old_pieces.begin(), old_pieces.end(),
                     [&](const StatePiece& old) { return targets_of(old) != nullptr; })) {
      return;  // nothing of this rank's: the arrays are not read
    }
    for (const auto& [name, values] :
         {std::pair{kMainWeights, &old_main_}, std::pair{kExpAvg, &old_m_}, std::pair{kExpAvgSq, &old_v_}}) {
      values->resize(old_numel);
      reader.read(name, values->data(), old_numel * sizeof(float));
    }
    for (const StatePiece& old : old_pieces) {
      const auto* targets = targets_of(old);
      if (targets == nullptr) continue;
      if (saved.remap) {
        copy_remapped(old, to_mine[old.param], *targets, saved, split_rank);
      } else {
        copy_overlaps(old, *targets);
      }
    }
  }

 private:
  void copy(std::size_t from, std::size_t to, std::size_t count) {
    std::copy_n(old_main_.begin() + from, count, main_weights_.begin() + to);
    std::copy_n(old_m_.begin() + from, count, exp_avg_.begin() + to);
    std::copy_n(old_v_.begin() + from, count, exp_avg_sq_.begin() + to);
    copied_ += count;
  }

  // The same slicing on both sides: each overlap of parameter ranges is one copy.
  void copy_overlaps(const StatePiece& old, const std::vector<const StatePiece*>& targets) {
    for (const StatePiece* target : targets) {
      const std::size_t begin = std::max(old.param_offset, target->param_offset);
      const std::size_t end = std::min(old.param_offset + old.numel, target->param_offset + target->numel);
      if (begin >= end) continue;
      copy(old.state_offset + (begin - old.param_offset), target->state_offset + (begin - target->param_offset),
           end - begin);
    }
  }

  // Another slicing (tensor-parallel size): the saved slice and this rank's interleave, so
  // each element is mapped on its own.
  void copy_remapped(const StatePiece& old, std::size_t param, const std::vector<const StatePiece*>& targets,
                     const SavedState& saved, int split_rank) {
    for (std::size_t j = 0; j < old.numel; ++j) {
      const std::optional<std::size_t> at = saved.remap(param, split_rank, old.param_offset + j);
      if (!at) continue;
      for (const StatePiece* target : targets) {
        if (*at >= target->param_offset && *at < target->param_offset + target->numel) {
          copy(old.state_offset + j, target->state_offset + (*at - target->param_offset), 1);
        }
      }
    }
  }

  std::vector<std::vector<const StatePiece*>> mine_;
  std::span<float> main_weights_, exp_avg_, exp_avg_sq_;
  std::size_t wanted_ = 0;
  std::size_t copied_ = 0;
  std::vector<float> old_main_, old_m_, old_v_;  // one saved file's arrays
};

}  // namespace

std::filesystem::path optimizer_shard_file(const std::filesystem::path& dir, int rank) {
  return dir / fmt::format("optim_rank_{}.adm", rank);
}

void write_optimizer_shard(const std::filesystem::path& dir, const ParamList& params,
                           const OptimizerCheckpointInfo& info, std::span<const StatePiece> pieces,
                           std::span<const float> main_weights, std::span<const float> exp_avg,
                           std::span<const float> exp_avg_sq) {
  ADAMANT_CHECK(main_weights.size() == exp_avg.size() && exp_avg.size() == exp_avg_sq.size(),
                "write_optimizer_shard: state arrays of different sizes");
  ArchiveWriter writer(optimizer_shard_file(dir, info.rank));
  nlohmann::json& meta = writer.meta();
  meta["format_version"] = kOptimizerCheckpointVersion;
  meta["optimizer"] = info.optimizer;
  meta["step"] = info.step;
  meta["loss_scaler"] = info.loss_scaler;
  meta["dp_size"] = info.dp_size;
  meta["rank"] = info.rank;
  meta["file_count"] = info.file_count;
  meta["bucket_cap_mb"] = info.bucket_cap_mb;
  nlohmann::json param_list = nlohmann::json::array();
  for (const ParamSpec& spec : params.params) {
    param_list.push_back({{"name", spec.name}, {"shape", spec.shape}, {"numel", spec.numel}});
  }
  meta["params"] = std::move(param_list);
  nlohmann::json piece_list = nlohmann::json::array();
  for (const StatePiece& piece : pieces) {
    piece_list.push_back({piece.param, piece.param_offset, piece.state_offset, piece.numel});
  }
  meta["pieces"] = std::move(piece_list);
  const std::vector<std::int64_t> shape = {static_cast<std::int64_t>(main_weights.size())};
  writer.add(kMainWeights, main_weights.data(), DType::f32, shape);
  writer.add(kExpAvg, exp_avg.data(), DType::f32, shape);
  writer.add(kExpAvgSq, exp_avg_sq.data(), DType::f32, shape);
  writer.commit();
}

OptimizerCheckpointInfo read_optimizer_state(const SavedState& saved, const ParamList& params,
                                             std::span<const StatePiece> pieces, std::span<float> main_weights,
                                             std::span<float> exp_avg, std::span<float> exp_avg_sq) {
  ADAMANT_CHECK(!saved.folders.empty(), "read_optimizer_state: no checkpoint folder given");
  StateTargets targets(params, pieces, main_weights, exp_avg, exp_avg_sq);
  std::unordered_map<std::string, std::size_t> index_of;
  for (std::size_t p = 0; p < params.size(); ++p) index_of.emplace(params[p].name, p);
  std::vector<int> source_stage(params.size(), -1);

  OptimizerCheckpointInfo info;
  bool have_info = false;
  std::vector<std::string> missing;
  for (const SavedStateFolder& folder : saved.folders) {
    const std::filesystem::path& dir = folder.dir;
    // A checkpoint on node-local disks holds only its host's shards here: read those present, and
    // name missing ones only if this rank's state lies in them.
    const std::vector<int> present = present_shard_indices(dir);
    ADAMANT_CHECK(!present.empty(),
                  "no optimizer checkpoint in {}: optim_rank_0.adm and every other optim_rank_<r>.adm are missing; "
                  "pass the folder that Optimizer::save wrote",
                  dir.string());
    const auto first_file = optimizer_shard_file(dir, present.front());
    OptimizerCheckpointInfo folder_info;
    bool have_folder_info = false;
    std::vector<std::size_t> to_mine;
    for (int file_index = 0; file_index < (have_folder_info ? folder_info.file_count : present.back() + 1);
         ++file_index) {
      const auto file = optimizer_shard_file(dir, file_index);
      if (!std::filesystem::exists(file)) {
        missing.push_back(file.filename().string());
        continue;
      }
      const ArchiveReader reader(file);
      const OptimizerCheckpointInfo file_info = info_from_meta(reader.meta(), file);
      if (!have_folder_info) {
        folder_info = file_info;
        have_folder_info = true;
        to_mine = match_saved_params(reader.meta(), params, index_of, folder.stage, static_cast<bool>(saved.remap),
                                     source_stage, dir);
      }
      if (!have_info) {
        info = file_info;
        have_info = true;
      }
      ADAMANT_CHECK(file_info.file_count == folder_info.file_count && file_info.step == info.step &&
                        file_info.rank == file_index && present.back() < folder_info.file_count,
                    "optimizer checkpoint {} mixes files of different saves ({} is rank {} of {} at step {}, {} is "
                    "rank {} of {} at step {}); save again",
                    dir.string(), file.filename().string(), file_info.rank, file_info.file_count, file_info.step,
                    first_file.filename().string(), folder_info.rank, folder_info.file_count, info.step);
      targets.copy_file(reader, file, to_mine, saved, folder.split_rank);
    }
  }
  for (std::size_t p = 0; p < params.size(); ++p) {
    ADAMANT_CHECK(!targets.holds(p) || source_stage[p] != -1,
                  "checkpoint {} was written for another model: it has no optimizer state for parameter '{}'",
                  saved.folders.front().dir.string(), params[p].name);
  }
  ADAMANT_CHECK(targets.copied() == targets.wanted() || missing.empty(),
                "optimizer checkpoint {} is incomplete here: {} (of its shard files) hold part of this rank's state "
                "but are missing. A checkpoint written to node-local disks "
                "(exp_manager.checkpoint_callback_params.node_local) resumes on the same hosts and layout only; to "
                "resume on another, copy every host's optim_rank_*.adm into one folder first",
                saved.folders.front().dir.string(), fmt::format("{}", fmt::join(missing, ", ")));
  ADAMANT_CHECK(targets.copied() == targets.wanted(),
                "optimizer checkpoint {} covers {} of the {} state elements this rank needs (pieces overlap or are "
                "missing); the checkpoint is damaged",
                saved.folders.front().dir.string(), targets.copied(), targets.wanted());
  return info;
}

}  // namespace adamant::optim
