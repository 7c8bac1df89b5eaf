#include "adamant/train/gpu_peak.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "adamant/core/cuda_runtime.h"

namespace adamant::train {

namespace {

struct DatasheetPeak {
  std::string_view model;    // a whole word of the name
  std::string_view variant;  // another word the name must hold too; empty: any other variant
  double tflops;
};

// Dense bf16 tensor TFLOP/s: Blackwell, Hopper (Grace Hopper, H200 NVL and SXM, H100 and
// H800 PCIe, NVL and SXM), Ampere, Ada. A model's variants come before its plain entry.
constexpr DatasheetPeak kPeaks[] = {
    {"GB200", "", 2500.0},   {"B200", "", 2250.0},   {"GH200", "", 989.0}, {"H200", "NVL", 835.0},  {"H200", "", 989.0},
    {"H100", "PCIE", 756.0}, {"H100", "NVL", 835.0}, {"H100", "", 989.0},  {"H800", "PCIE", 756.0}, {"H800", "", 989.0},
    {"A100", "", 312.0},     {"A800", "", 312.0},    {"A30", "", 165.0},   {"A10", "", 125.0},      {"L40S", "", 362.0},
    {"L40", "", 181.0},      {"L4", "", 121.0},
};

// The name's words, upper case, split at spaces and hyphens ("A100-SXM4-80GB": A100, SXM4, 80GB).
std::vector<std::string> words_of(std::string_view name) {
  std::vector<std::string> words(1);
  for (const char c : name) {
    if (c == ' ' || c == '-') {
      if (!words.back().empty()) words.emplace_back();
    } else {
      words.back().push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

std::optional<double> datasheet_bf16_flops(std::string_view device_name) {
  const std::vector<std::string> words = words_of(device_name);
  auto holds = [&](std::string_view word) { return std::find(words.begin(), words.end(), word) != words.end(); };
  for (const DatasheetPeak& peak : kPeaks) {
    if (holds(peak.model) && (peak.variant.empty() || holds(peak.variant))) return peak.tflops * 1e12;
  }
  return std::nullopt;
}

FlopsReference flops_reference(const Device& device) {
  if (!device.is_cuda()) return {};
  FlopsReference reference{true, cuda::device_name(device.index), 0.0};
  reference.peak_flops = datasheet_bf16_flops(reference.gpu_name).value_or(0.0);
  return reference;
}

}  // namespace adamant::train
