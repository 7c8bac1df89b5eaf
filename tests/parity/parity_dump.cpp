// Runs a small GPT on the CPU in fp32 and writes what the PyTorch reference
// (gpt2_parity.py) checks, under --out:
//   hf/                      the model's starting weights, written by `adamant export`'s code
//   forward.safetensors      tokens, targets, logits [tokens, padded vocab] (each position from the
//                            causal prefix), loss, every parameter's gradient as grad.<Hugging Face
//                            name>, and the padded vocabulary rows (pad_rows, grad.pad_rows)
//   steps.safetensors        --steps optimizer steps on every rank's own micro-batch: tokens and
//                            targets [steps, ranks x batch, seq], lr and grad_norm per step, and the
//                            final weights as final.<name> and final.pad_rows
// Every rank runs the model; rank 0 writes. Usage (under mpirun for distributed_fused_adam):
//   parity_dump --out DIR --vocab-dir DIR --gelu exact|tanh --optimizer NAME --steps 10
// With --device cuda (one rank): the model runs on the GPU in bf16, hf/ holds its bf16 weights,
// and forward.safetensors only tokens, targets, logits, loss and pad_rows.
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "adamant/comm/mpi_communicator.h"
#include "adamant/comm/mpi_session.h"
#include "adamant/core/error.h"
#include "adamant/core/number_text.h"
#include "adamant/core/safetensors.h"
#include "adamant/model/gpt_model.h"
#include "adamant/model/hf_gpt2_layout.h"
#include "adamant/optim/lr_schedule.h"
#include "adamant/optim/optimizer.h"
#include "adamant/train/checkpoint.h"
#include "adamant/train/hf_gpt2_folder.h"
#include "adamant/train/train_config.h"

namespace adamant {
namespace {

constexpr int kBatch = 2;  // sequences per rank and step
constexpr std::uint64_t kSeed = 1234;

struct Args {
  std::filesystem::path out;
  std::filesystem::path vocab_dir;
  kernels::GeluForm gelu = kernels::GeluForm::exact;
  std::string optimizer = "fused_adam";
  int steps = 10;
  bool cuda = false;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--out") {
      a.out = value;
    } else if (key == "--vocab-dir") {
      a.vocab_dir = value;
    } else if (key == "--gelu") {
      ADAMANT_CHECK(value == "exact" || value == "tanh", "--gelu {}: use exact or tanh", value);
      a.gelu = value == "tanh" ? kernels::GeluForm::tanh : kernels::GeluForm::exact;
    } else if (key == "--optimizer") {
      a.optimizer = value;
    } else if (key == "--device") {
      ADAMANT_CHECK(value == "cpu" || value == "cuda", "--device {}: use cpu or cuda", value);
      a.cuda = value == "cuda";
    } else if (key == "--steps") {
      const std::optional<int> steps = number_from_text<int>(value);
      ADAMANT_CHECK(steps && *steps > 0, "--steps {}: use a whole number of steps, at least 1", value);
      a.steps = *steps;
    } else {
      fail("unknown argument {}", key);
    }
  }
  ADAMANT_CHECK(!a.out.empty() && !a.vocab_dir.empty(), "--out and --vocab-dir are required");
  return a;
}

// heads: 4 of size 16 on the CPU; the GPU's flash attention takes head sizes from 64, so 1 there.
model::GptConfig small_gpt(kernels::GeluForm gelu, int heads) {
  model::GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 64;
  c.num_attention_heads = heads;
  c.ffn_hidden_size = 256;
  c.seq_length = 16;
  c.vocab_size = 50257;  // GPT-2's, padded to 50304
  c.openai_gelu = gelu == kernels::GeluForm::tanh;
  c.hidden_dropout = c.attention_dropout = 0.0f;  // GptConfig defaults to NeMo's 0.1
  return c;
}

// Random tokens and their next-token targets for one sequence set, from (step, rank).
void fill_tokens(std::uint32_t stream, std::int32_t* tokens, std::int32_t* targets, std::size_t count, int vocab) {
  std::mt19937 rng(stream);
  std::uniform_int_distribution<std::int32_t> pick(0, vocab - 1);
  for (std::size_t i = 0; i < count; ++i) {
    tokens[i] = pick(rng);
    targets[i] = pick(rng);
  }
}

// Adds a little noise to every parameter, so that biases and layernorms (0 and 1 at init)
// take part in the comparison with values of their own.
void perturb(model::GptModel& model) {
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  auto* w = static_cast<float*>(model.weights().data);
  for (std::size_t i = 0; i < model.params().total_numel; ++i) w[i] += noise(rng);
}

// The tensors of a flat fp32 buffer (weights or grads) in Hugging Face layout, under `prefix`,
// and the padded vocabulary rows as <prefix>pad_rows.
void add_flat(SafetensorsWriter& writer, std::vector<std::vector<float>>& keep, const model::GptModel& model,
              const float* flat, const std::string& prefix) {
  const model::GptConfig& c = model.config();
  for (const model::HfTensor& t : model::hf_gpt2_tensors(c, model.params())) {
    const ParamSpec& spec = model.params()[t.param];
    std::size_t numel = 1;
    for (const std::int64_t d : t.shape) numel *= static_cast<std::size_t>(d);
    keep.emplace_back(numel);
    model::to_hf_layout(t, spec, flat + spec.offset, keep.back().data(), sizeof(float));
    writer.add(prefix + t.name, keep.back().data(), DType::f32, t.shape);
  }
  const ParamSpec& wte = model.params()[model.params().index_of("embedding.word_embeddings.weight")];
  const std::int64_t pad = c.padded_vocab_size() - c.vocab_size;
  keep.emplace_back(flat + wte.offset + static_cast<std::size_t>(c.vocab_size) * c.hidden_size,
                    flat + wte.offset + static_cast<std::size_t>(c.padded_vocab_size()) * c.hidden_size);
  writer.add(prefix + "pad_rows", keep.back().data(), DType::f32, {pad, c.hidden_size});
}

// The model's starting point as a Hugging Face folder, through a checkpoint and the export code.
void export_start(model::GptModel& model, const Args& args, DType dtype) {
  const model::GptConfig& g = model.config();
  train::TrainConfig config;
  config.model.num_layers = g.num_layers;
  config.model.hidden_size = g.hidden_size;
  config.model.num_attention_heads = g.num_attention_heads;
  config.model.ffn_hidden_size = g.ffn_hidden_size;
  config.model.seq_length = g.seq_length;
  config.model.max_position_embeddings = g.seq_length;
  config.model.openai_gelu = g.openai_gelu;
  config.model.bias_activation_fusion = g.bias_activation_fusion;
  config.model.hidden_dropout = 0.0;
  config.model.attention_dropout = 0.0;
  config.data.tokenizer.vocab_file = args.vocab_dir / "encoder.json";
  config.data.tokenizer.merge_file = args.vocab_dir / "vocab.bpe";
  config.optim.megatron_amp_O2 = false;
  const auto checkpoint = args.out / "checkpoint";
  train::write_weights_checkpoint(checkpoint, g, model.weights().data, DType::f32, train::to_yaml(config));
  train::export_hf_gpt2(checkpoint, args.out / "hf", dtype);
}

// Logits of every position of `tokens` ([kBatch, seq]), each from its causal prefix.
std::vector<float> all_logits(model::GptModel& model, const std::vector<std::int32_t>& tokens) {
  const int seq = model.config().seq_length, padded = model.config().padded_vocab_size();
  std::vector<float> logits(tokens.size() * static_cast<std::size_t>(padded));
  for (int b = 0; b < kBatch; ++b) {
    for (int t = 0; t < seq; ++t) {
      const std::size_t row = static_cast<std::size_t>(b) * seq + t;
      model.next_token_logits(std::span<const std::int32_t>(tokens).subspan(static_cast<std::size_t>(b) * seq, t + 1),
                              std::span<float>(logits).subspan(row * padded, padded));
    }
  }
  return logits;
}

// The GPU check: bf16 weights on the GPU, exported in bf16; logits and loss of one batch.
void run_cuda(const Args& args) {
  const model::GptConfig config = small_gpt(args.gelu, 1);
  model::GptModel reference(config, DType::f32, kBatch, Device::cpu(), kSeed);
  perturb(reference);
  std::filesystem::create_directories(args.out);
  export_start(reference, args, DType::bf16);
  model::GptModel gpu(config, DType::bf16, kBatch, Device::cuda(0), kSeed);
  train::load_checkpoint(args.out / "checkpoint", gpu, nullptr);
  const std::size_t count = static_cast<std::size_t>(kBatch) * config.seq_length;
  std::vector<std::int32_t> tokens(count), targets(count);
  fill_tokens(1, tokens.data(), targets.data(), count, config.vocab_size);
  const double loss = gpu.forward_loss({tokens, targets, kBatch, 0});
  const std::vector<float> logits = all_logits(gpu, tokens);
  SafetensorsWriter w;
  std::vector<std::vector<float>> keep;
  w.add("tokens", tokens.data(), DType::i32, {kBatch, config.seq_length});
  w.add("targets", targets.data(), DType::i32, {kBatch, config.seq_length});
  w.add("logits", logits.data(), DType::f32, {kBatch * config.seq_length, config.padded_vocab_size()});
  w.add("loss", &loss, DType::f64, {1});
  // The padded rows in fp32; the reference rounds them to bf16 as the GPU model holds them.
  add_flat(w, keep, reference, static_cast<const float*>(reference.weights().data), "");
  w.write(args.out / "forward.safetensors");
}

void run(const Args& args) {
  comm::MpiCommunicator world;
  const int ranks = world.size();
  const bool writer = world.rank() == 0;
  const model::GptConfig config = small_gpt(args.gelu, 4);
  const ParamList params = model::build_param_list(config);

  optim::OptimizerOptions options;
  options.name = args.optimizer;
  options.beta1 = 0.9;
  options.beta2 = 0.95;
  options.eps = 1e-8;
  options.weight_decay = 0.1;
  options.gradient_clip_val = 0.5;
  // fp32 model weights throughout. distributed_fused_adam keeps its own sharded fp32 main weights
  // (O2's arrangement) and copies them into the model's fp32 weights after each step.
  options.model_dtype = DType::f32;
  options.megatron_amp_O2 = args.optimizer == "distributed_fused_adam";
  options.bucket_cap_mb = 1.0;  // several buckets
  Stream stream;
  auto optimizer = optim::make_optimizer(options, params, world, stream);
  model::GptModel model(config, DType::f32, kBatch, Device::cpu(), kSeed, optimizer->padded_numel());
  model.set_stream(stream);
  perturb(model);
  if (writer) std::filesystem::create_directories(args.out);
  if (writer) export_start(model, args, DType::f32);

  const int seq = config.seq_length, vocab = config.vocab_size, padded = config.padded_vocab_size();
  const std::size_t per_rank = static_cast<std::size_t>(kBatch) * seq;
  auto* grads = static_cast<float*>(model.grads().data);
  auto* weights = static_cast<float*>(model.weights().data);
  {  // one forward and backward, and the logits of every position
    std::vector<std::int32_t> tokens(per_rank), targets(per_rank);
    fill_tokens(1, tokens.data(), targets.data(), per_rank, vocab);
    model.zero_grads();
    const double loss = model.forward_backward({tokens, targets, kBatch, 0}, 1.0f);
    const std::vector<float> logits = all_logits(model, tokens);
    if (writer) {
      SafetensorsWriter w;
      std::vector<std::vector<float>> keep;
      w.add("tokens", tokens.data(), DType::i32, {kBatch, seq});
      w.add("targets", targets.data(), DType::i32, {kBatch, seq});
      w.add("logits", logits.data(), DType::f32, {kBatch * seq, padded});
      w.add("loss", &loss, DType::f64, {1});
      add_flat(w, keep, model, grads, "grad.");
      add_flat(w, keep, model, weights, "");  // pad_rows: the padded rows of the starting weights
      w.write(args.out / "forward.safetensors");
    }
    model.zero_grads();
  }

  optimizer->attach(model.weights(), model.grads());
  optim::LrSchedule schedule;
  schedule.lr = 1e-3;
  schedule.min_lr = 1e-4;
  schedule.warmup_steps = 3;
  schedule.max_steps = args.steps;
  const std::size_t all_ranks = per_rank * static_cast<std::size_t>(ranks);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(args.steps) * all_ranks), targets(tokens.size());
  std::vector<double> lrs, norms;
  for (int s = 0; s < args.steps; ++s) {
    for (int r = 0; r < ranks; ++r) {
      const std::size_t at = static_cast<std::size_t>(s) * all_ranks + static_cast<std::size_t>(r) * per_rank;
      fill_tokens(static_cast<std::uint32_t>(100 + s * 17 + r), tokens.data() + at, targets.data() + at, per_rank,
                  vocab);
    }
    const std::size_t mine =
        static_cast<std::size_t>(s) * all_ranks + static_cast<std::size_t>(world.rank()) * per_rank;
    const double lr = optim::learning_rate(schedule, s);
    optimizer->wait_for_params();
    model.discard_grads();  // a step writes its gradients over the last one's, which the optimizer leaves
    model.forward_backward({std::span<const std::int32_t>(tokens).subspan(mine, per_rank),
                            std::span<const std::int32_t>(targets).subspan(mine, per_rank), kBatch,
                            static_cast<std::uint64_t>(world.rank() * kBatch)},
                           static_cast<float>(optimizer->loss_scale()),
                           [&](std::size_t index) { optimizer->on_grad_ready(index); });
    const optim::StepResult result = optimizer->step(lr, 1.0 / ranks);
    lrs.push_back(lr);
    norms.push_back(result.grad_norm);
  }
  optimizer->wait_for_params();
  stream.synchronize();
  if (writer) {
    SafetensorsWriter w;
    std::vector<std::vector<float>> keep;
    const auto steps = static_cast<std::int64_t>(args.steps);
    w.add("tokens", tokens.data(), DType::i32, {steps, ranks * kBatch, seq});
    w.add("targets", targets.data(), DType::i32, {steps, ranks * kBatch, seq});
    w.add("lr", lrs.data(), DType::f64, {steps});
    w.add("grad_norm", norms.data(), DType::f64, {steps});
    add_flat(w, keep, model, weights, "final.");
    w.write(args.out / "steps.safetensors");
  }
  world.barrier();
}

}  // namespace
}  // namespace adamant

int main(int argc, char** argv) {
  adamant::comm::MpiSession mpi(&argc, &argv);
  try {
    const adamant::Args args = adamant::parse_args(argc, argv);
    if (args.cuda) {
      adamant::run_cuda(args);
    } else {
      adamant::run(args);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parity_dump: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return 0;
}
