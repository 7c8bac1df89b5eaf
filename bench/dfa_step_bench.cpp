// DistributedFusedAdam's step on GPT-3 1.3B's parameter list, one GPU per rank:
//
//   mpirun -np 2 dfa_step_bench [--reps 10] [--warmups 3] [--json out.json] [--layers 24 --hidden 2048 ...]
//
// bf16 model weights, fp32 gradients on the GPU, bucket_cap_mb 100 and 25, grad sync fp32 and bf16,
// overlap_grad_sync on, overlap_param_sync off (so step() includes the all-gathers), clipping at 1.0.
// Timed with steady_clock after synchronisation, each rank's time taken as the slowest rank's (the step is
// collective), median of --reps after --warmups:
//   grad sync  on_grad_ready for every parameter in layout order (the bucketed reduce-scatters, bf16 cast
//              included) until every rank's reduce-scatters completed (a communicator barrier);
//   step       step(): grad norm, Adam on this rank's shard, all-gathers (the fp32 grads are left for the model's
//              next backward to write over);
//   whole      both back to back without the barrier in between.
// Besides, on the same buckets and buffers: the reduce-scatters alone, the all-gathers alone (bus bandwidth
// as NCCL reports it: bytes of the whole buffer / time * (n - 1) / n) and the Adam kernel alone on a buffer of
// the shard's size (bytes read + written / time, against HBM).
//
// Gradients and weights are zero: the kernels and NCCL move the same bytes whatever the values.
// Without a GPU it runs on the host with MPI (for a smoke test with a small --layers/--hidden).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adamant/comm/mpi_communicator.h"
#include "adamant/comm/mpi_session.h"
#include "adamant/comm/process_grid.h"
#include "adamant/core/buffer.h"
#include "adamant/core/error.h"
#include "adamant/core/number_text.h"
#include "adamant/core/stream.h"
#include "adamant/kernels/adam.h"
#include "adamant/model/gpt_config.h"
#include "adamant/model/param_layout.h"
#include "adamant/optim/distributed_fused_adam.h"
#include "bench_flags.h"

namespace {

using namespace adamant;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  int reps = 10;
  int warmups = 3;
  std::string json_path;
  model::GptConfig model{};
  std::vector<double> bucket_caps_mb = {100, 25};
};

// Bad flags or values end the program with status 2 (bench_flags.h).
BenchOptions parse(int argc, char** argv) {
  const bench::BenchFlags flags(
      argc, argv, "dfa_step_bench",
      "[--reps N] [--warmups N] [--json PATH] [--bucket-caps MIB,MIB...] [--layers N] [--hidden N] [--heads N] "
      "[--ffn N] [--seq N] [--vocab N]",
      {"--reps", "--warmups", "--json", "--bucket-caps", "--layers", "--hidden", "--heads", "--ffn", "--seq",
       "--vocab"});
  BenchOptions o;
  o.reps = flags.whole_number("--reps", o.reps, 1);
  o.warmups = flags.whole_number("--warmups", o.warmups, 0);
  o.json_path = flags.text("--json", "");
  o.model.num_layers = flags.whole_number("--layers", 24, 1);
  o.model.hidden_size = flags.whole_number("--hidden", 2048, 1);
  o.model.num_attention_heads = flags.whole_number("--heads", 16, 1);
  o.model.ffn_hidden_size = flags.whole_number("--ffn", 4 * o.model.hidden_size, 1);
  o.model.seq_length = flags.whole_number("--seq", 2048, 1);
  o.model.vocab_size = flags.whole_number("--vocab", 50257, 1);
  const std::string caps = flags.text("--bucket-caps", "");
  if (!caps.empty()) {
    o.bucket_caps_mb.clear();
    for (std::size_t start = 0; start <= caps.size();) {
      const std::size_t comma = std::min(caps.find(',', start), caps.size());
      const std::optional<double> cap = number_from_text<double>(std::string_view(caps).substr(start, comma - start));
      if (!cap || *cap <= 0) flags.fail("--bucket-caps " + caps + " is not a list of positive MiB such as 100,25");
      o.bucket_caps_mb.push_back(*cap);
      start = comma + 1;
    }
  }
  return o;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

double elapsed_ms(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Times `body` (which returns after its work is complete on this rank) `reps` times after `warmups`, every rank
// starting together; each repetition counts as the slowest rank's time. Returns the median in ms.
template <typename Body>
double time_collective(const comm::MpiCommunicator& host, int warmups, int reps, Body&& body) {
  std::vector<double> times;
  for (int i = 0; i < warmups + reps; ++i) {
    MPI_Barrier(host.mpi_comm());
    const auto start = Clock::now();
    body();
    double ms = elapsed_ms(start, Clock::now());
    MPI_Allreduce(MPI_IN_PLACE, &ms, 1, MPI_DOUBLE, MPI_MAX, host.mpi_comm());
    if (i >= warmups) times.push_back(ms);
  }
  return median(times);
}

struct Row {
  double bucket_cap_mb = 0;
  DType grad_sync = DType::f32;
  std::size_t buckets = 0;
  std::size_t padded_numel = 0, shard_numel = 0;
  double grad_sync_ms = 0, step_ms = 0, whole_ms = 0;
  double reduce_scatter_ms = 0, all_gather_ms = 0, adam_ms = 0;
  double adam_bytes = 0;
};

// NCCL's bus bandwidth of a reduce-scatter or all-gather over `ranks` of a buffer of `bytes` in total.
double bus_gbps(double bytes, double ms, int ranks) { return bytes / (ms * 1e-3) * (ranks - 1) / ranks / 1e9; }

Row measure(const BenchOptions& bench, const ParamList& params, double cap_mb, DType grad_sync,
            comm::MpiCommunicator& host, comm::Communicator& device_comm, Device device) {
  const Stream stream = device.is_cpu() ? Stream() : Stream(device);
  optim::OptimizerOptions options;
  options.name = "distributed_fused_adam";
  options.model_dtype = DType::bf16;
  options.megatron_amp_O2 = true;
  options.bucket_cap_mb = cap_mb;
  options.grad_sync_dtype = grad_sync;
  options.overlap_grad_sync = true;
  options.overlap_param_sync = false;
  options.gradient_clip_val = 1.0;
  options.weight_decay = 0.1;
  options.beta2 = 0.95;
  optim::DistributedFusedAdam dfa(options, params, device_comm, stream);
  const std::size_t padded = dfa.padded_numel();
  Buffer weight_buffer(padded * sizeof(std::uint16_t), device), grad_buffer(padded * sizeof(float), device);
  const Tensor weights = Tensor::of(weight_buffer, DType::bf16), grads = Tensor::of(grad_buffer, DType::f32);
  dfa.attach(weights, grads);
  stream.synchronize();

  Row row;
  row.bucket_cap_mb = cap_mb;
  row.grad_sync = grad_sync;
  row.buckets = dfa.plan().buckets().size();
  row.padded_numel = padded;
  row.shard_numel = dfa.plan().shard_numel_total();
  const double grad_scale = 0.5, lr = 1e-4;
  const auto report_all_grads = [&] {
    for (std::size_t p = 0; p < params.size(); ++p) dfa.on_grad_ready(p);
  };

  // (a) and (b): the grad sync, then step(), in one iteration with a barrier between them.
  std::vector<double> sync_times, step_times;
  for (int i = 0; i < bench.warmups + bench.reps; ++i) {
    MPI_Barrier(host.mpi_comm());
    const auto start = Clock::now();
    report_all_grads();
    device_comm.barrier();  // returns once every rank's reduce-scatters have completed
    const auto synced = Clock::now();
    dfa.step(lr, grad_scale);
    stream.synchronize();
    double times[2] = {elapsed_ms(start, synced), elapsed_ms(synced, Clock::now())};
    MPI_Allreduce(MPI_IN_PLACE, times, 2, MPI_DOUBLE, MPI_MAX, host.mpi_comm());
    if (i >= bench.warmups) {
      sync_times.push_back(times[0]);
      step_times.push_back(times[1]);
    }
  }
  row.grad_sync_ms = median(sync_times);
  row.step_ms = median(step_times);
  // (c) the whole thing.
  row.whole_ms = time_collective(host, bench.warmups, bench.reps, [&] {
    report_all_grads();
    dfa.step(lr, grad_scale);
    stream.synchronize();
  });

  // The collectives alone, issued back to back on the optimizer's buckets, in place as the optimizer does.
  const int rank = device_comm.rank();
  Buffer staging_buffer(grad_sync == DType::bf16 ? padded * sizeof(std::uint16_t) : 0, device);
  const Tensor sync_buffer = grad_sync == DType::bf16 ? Tensor::of(staging_buffer, DType::bf16) : grads;
  std::vector<comm::CommHandle> handles(row.buckets);
  row.reduce_scatter_ms = time_collective(host, bench.warmups, bench.reps, [&] {
    for (std::size_t b = 0; b < row.buckets; ++b) {
      const optim::Bucket& bucket = dfa.plan().buckets()[b];
      const Tensor send = sync_buffer.slice(bucket.offset, bucket.numel);
      handles[b] = device_comm.reduce_scatter_async(
          send, send.slice(static_cast<std::size_t>(rank) * bucket.shard_numel, bucket.shard_numel),
          comm::ReduceOp::sum);
    }
    for (auto& handle : handles) handle.wait(Stream());
  });
  row.all_gather_ms = time_collective(host, bench.warmups, bench.reps, [&] {
    for (std::size_t b = 0; b < row.buckets; ++b) {
      const optim::Bucket& bucket = dfa.plan().buckets()[b];
      const Tensor gathered = weights.slice(bucket.offset, bucket.numel);
      handles[b] = device_comm.all_gather_async(
          gathered.slice(static_cast<std::size_t>(rank) * bucket.shard_numel, bucket.shard_numel), gathered);
    }
    for (auto& handle : handles) handle.wait(Stream());
  });

  // The Adam kernel alone over one buffer of the shard's size (one segment, weight decay on).
  const std::size_t n = row.shard_numel;
  Buffer main(n * sizeof(float), device), m(n * sizeof(float), device), v(n * sizeof(float), device);
  Buffer shard_grad(n * dtype_size(grad_sync), device), model_copy(n * sizeof(std::uint16_t), device);
  Buffer segment_buffer(3 * sizeof(std::int64_t), device);
  const std::int64_t segment[3] = {0, static_cast<std::int64_t>(n), 1};
  copy_bytes(segment_buffer.data(), device, segment, Device::cpu(), sizeof(segment));
  kernels::AdamArgs args;
  args.lr = static_cast<float>(lr);
  args.weight_decay = 0.1f;
  args.beta2 = 0.95f;
  const Tensor segments = Tensor::of(segment_buffer, DType::i64);
  row.adam_ms = time_collective(host, bench.warmups, bench.reps, [&] {
    kernels::adam_step(args, segments, Tensor::of(shard_grad, grad_sync), Tensor::of(main, DType::f32),
                       Tensor::of(m, DType::f32), Tensor::of(v, DType::f32), Tensor::of(model_copy, DType::bf16),
                       stream);
    stream.synchronize();
  });
  // grad read, main weight, exp_avg and exp_avg_sq read and written, bf16 copy written.
  row.adam_bytes = static_cast<double>(n) * static_cast<double>(dtype_size(grad_sync) + 3 * 8 + 2);
  return row;
}

const char* sync_name(DType dtype) { return dtype == DType::bf16 ? "bf16" : "fp32"; }

void print_rows(const std::vector<Row>& rows, int ranks, std::size_t weights) {
  std::printf("DistributedFusedAdam step, %zu weights, %d ranks (median ms, slowest rank)\n", weights, ranks);
  std::printf("%-6s %-5s %7s | %9s %9s %9s | %9s %8s %9s %8s | %9s %7s\n", "cap MB", "sync", "buckets", "grad sync",
              "step", "whole", "RS alone", "RS GB/s", "AG alone", "AG GB/s", "Adam", "TB/s");
  for (const Row& r : rows) {
    const double sync_bytes = static_cast<double>(r.padded_numel * dtype_size(r.grad_sync));
    const double gather_bytes = static_cast<double>(r.padded_numel * 2);
    std::printf("%-6g %-5s %7zu | %9.3f %9.3f %9.3f | %9.3f %8.1f %9.3f %8.1f | %9.3f %7.2f\n", r.bucket_cap_mb,
                sync_name(r.grad_sync), r.buckets, r.grad_sync_ms, r.step_ms, r.whole_ms, r.reduce_scatter_ms,
                bus_gbps(sync_bytes, r.reduce_scatter_ms, ranks), r.all_gather_ms,
                bus_gbps(gather_bytes, r.all_gather_ms, ranks), r.adam_ms, r.adam_bytes / (r.adam_ms * 1e-3) / 1e12);
    std::printf("       in the optimizer: grad sync %.1f GB/s bus bandwidth (reduce-scatter%s)\n",
                bus_gbps(sync_bytes, r.grad_sync_ms, ranks), r.grad_sync == DType::bf16 ? " + bf16 cast" : "");
  }
  std::fflush(stdout);
}

void write_json(const std::string& path, const std::vector<Row>& rows, int ranks, std::size_t weights) {
  FILE* out = std::fopen(path.c_str(), "w");
  ADAMANT_CHECK(out != nullptr, "dfa_step_bench: cannot write {}; pass a writable --json path", path);
  std::fprintf(out, "{\"weights\": %zu, \"ranks\": %d, \"rows\": [\n", weights, ranks);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(out,
                 "  {\"bucket_cap_mb\": %g, \"grad_sync\": \"%s\", \"buckets\": %zu, \"padded_numel\": %zu, "
                 "\"shard_numel\": %zu, \"grad_sync_ms\": %.4f, \"step_ms\": %.4f, \"whole_ms\": %.4f, "
                 "\"reduce_scatter_ms\": %.4f, \"all_gather_ms\": %.4f, \"adam_ms\": %.4f, \"adam_bytes\": %.0f}%s\n",
                 r.bucket_cap_mb, sync_name(r.grad_sync), r.buckets, r.padded_numel, r.shard_numel, r.grad_sync_ms,
                 r.step_ms, r.whole_ms, r.reduce_scatter_ms, r.all_gather_ms, r.adam_ms, r.adam_bytes,
                 i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(out, "]}\n");
  std::fclose(out);
}

int run(int argc, char** argv, const comm::MpiSession& session) {
  const BenchOptions bench = parse(argc, argv);
  comm::MpiCommunicator world;
  const bool gpu = cuda_device_count() >= session.local_size();
  const Device device = gpu ? Device::cuda(session.local_rank()) : Device::cpu();
  if (!gpu && world.rank() == 0) {
    std::printf("dfa_step_bench: no GPU per rank (%d visible); running on the host with MPI\n", cuda_device_count());
  }
  const auto device_comm = comm::make_device_communicator(world, device);
  const ParamList params = model::build_param_list(bench.model);
  std::vector<Row> rows;
  for (const double cap : bench.bucket_caps_mb) {
    for (const DType sync : {DType::f32, DType::bf16}) {
      rows.push_back(measure(bench, params, cap, sync, world, *device_comm, device));
      if (world.rank() == 0) {
        std::printf("measured bucket_cap_mb %g, %s grad sync\n", cap, sync_name(sync));
        std::fflush(stdout);
      }
    }
  }
  if (world.rank() == 0) {
    print_rows(rows, world.size(), params.total_numel);
    if (!bench.json_path.empty()) write_json(bench.json_path, rows, world.size(), params.total_numel);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const adamant::comm::MpiSession session(&argc, &argv);
  try {
    return run(argc, argv, session);
  } catch (const adamant::Error& error) {
    std::fprintf(stderr, "dfa_step_bench (rank %d): %s\n", session.world_rank(), error.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
