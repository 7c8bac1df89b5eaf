// A CUPTI activity tracer that CUDA loads into any program through
// CUDA_INJECTION64_PATH: it records the device start and end of every kernel, memcpy and
// memset (inside CUDA graphs too, with the graph's id), and the host start and end of every
// CUDA runtime and driver call, and writes them at exit to $ADAMANT_TIMELINE_OUT.<pid>.tsv
// (default kernel_timeline.<pid>.tsv), one line each: kind (kernel, memcpy, memset; api for a
// host call), start ns, end ns, graph id (0 outside graphs and for host calls), correlation
// id (the call that issued the GPU work: one id for all the work of a graph launch), name.
// CUPTI puts device and host times on one clock, so a gap on the GPU can be set against what
// the host was doing then.
// bench/kernel_timeline/idle_gaps.py reports where the GPU sat idle between them, and
// kernel_parts.py the kernel time a step by part of the model, for any program traced
// (PyTorch's too, so that ours and the peer compare kernel by kernel).
//
//   CUDA_INJECTION64_PATH=build/bench/kernel_timeline/libkernel_timeline.so
//     ADAMANT_TIMELINE_OUT=/tmp/run build/adamant train ...   (one command line)
//
// CUPTI's buffer callbacks carry no user pointer, so the records live in one object that
// the injection entry point creates; nothing else in the program sees it.
#include <cupti.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Activity {
  const char* kind;
  std::uint64_t start;
  std::uint64_t end;
  std::uint32_t graph;
  std::uint32_t correlation;
  std::string name;
};

std::string call_name(CUpti_CallbackDomain domain, std::uint32_t cbid) {
  const char* name = nullptr;
  if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) return "?";
  return name;
}

class Timeline {
 public:
  void add(const CUpti_Activity* record) {
    const std::lock_guard<std::mutex> lock(mutex_);
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        activities_.push_back({"kernel", kernel->start, kernel->end, kernel->graphId, kernel->correlationId,
                               kernel->name != nullptr ? kernel->name : "?"});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        activities_.push_back({"memcpy", copy->start, copy->end, copy->graphId, copy->correlationId, "memcpy"});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* set = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        activities_.push_back({"memset", set->start, set->end, set->graphId, set->correlationId, "memset"});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* call = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        const CUpti_CallbackDomain domain =
            record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
        activities_.push_back({"api", call->start, call->end, 0, call->correlationId, call_name(domain, call->cbid)});
        break;
      }
      default:
        break;
    }
  }

  // Written only by a process that ran GPU work: programs that start helper processes
  // (each of which loads the tracer too) leave one file per process that used the GPU.
  void write() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (activities_.empty()) return;
    const char* prefix = std::getenv("ADAMANT_TIMELINE_OUT");
    const std::string path = std::string(prefix != nullptr ? prefix : "kernel_timeline") + "." +
                             std::to_string(static_cast<long>(getpid())) + ".tsv";
    const std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "w"), &std::fclose);
    if (!file) {
      std::fprintf(stderr, "kernel_timeline: cannot write %s\n", path.c_str());
      return;
    }
    for (const Activity& a : activities_) {
      std::fprintf(file.get(), "%s\t%llu\t%llu\t%u\t%u\t%s\n", a.kind, static_cast<unsigned long long>(a.start),
                   static_cast<unsigned long long>(a.end), a.graph, a.correlation, a.name.c_str());
    }
    std::fprintf(stderr, "kernel_timeline: %zu activities in %s\n", activities_.size(), path.c_str());
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Activity> activities_;
};

Timeline& timeline() {
  static Timeline* instance = new Timeline();  // never destroyed: CUPTI may deliver buffers until the very end
  return *instance;
}

constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid) {
  const std::unique_ptr<std::uint8_t, void (*)(void*)> owned(buffer, &std::free);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) timeline().add(record);
}

bool check(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return true;
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  std::fprintf(stderr, "kernel_timeline: %s failed: %s\n", what, text != nullptr ? text : "unknown error");
  return false;
}

void flush_and_write() {
  check(cuptiActivityFlushAll(1), "cuptiActivityFlushAll");
  timeline().write();
}

}  // namespace

extern "C" int InitializeInjection() {
  timeline();
  const bool ok =
      check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks") &&
      check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enabling kernel records") &&
      check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enabling memcpy records") &&
      check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enabling memset records") &&
      check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), "enabling runtime call records") &&
      check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER), "enabling driver call records");
  if (ok) std::atexit(flush_and_write);
  return ok ? 1 : 0;
}
