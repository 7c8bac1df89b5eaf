#!/usr/bin/env python3
"""bench/run_metrics.py on metrics.jsonl files laid out as `adamant train` writes them: the medians
after the warm-up, and the MFU against the peak the run found for its GPU, or the one given."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import run_metrics  # noqa: E402

GIB = 2**30


def write_run(records):
    path = os.path.join(tempfile.mkdtemp(), "metrics.jsonl")
    with open(path, "w") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    return path


def steps(tokens_per_s):
    return [{"type": "train", "step": i + 1, "tokens_per_s": t, "step_s": 16384 / t, "exposed_comm_ms": 0.1 * i}
            for i, t in enumerate(tokens_per_s)]


def summary(**gpu):
    record = {"type": "summary", "world_size": 2, "data_parallel_size": 2, "tensor_parallel_size": 1,
              "peak_allocated_bytes_max": 8 * GIB, "peak_allocated_bytes_min": 7 * GIB,
              "peak_device_in_use_bytes_max": 9 * GIB, "peak_device_in_use_bytes_min": 9 * GIB,
              "model_flops_per_token": 1e9}
    record.update(gpu)
    return record


class RunMetricsTest(unittest.TestCase):
    def test_medians_after_the_warm_up(self):
        path = write_run(steps([1000, 2000, 400000, 600000, 500000]) + [summary()])
        r = run_metrics.summarize(path, skip=2)
        self.assertEqual(r["steady_steps"], 3)
        self.assertEqual(r["tokens_per_s"], 500000)
        self.assertAlmostEqual(r["exposed_comm_ms"], 0.3)
        self.assertEqual(r["tokens_per_s_per_gpu"], 250000)
        self.assertEqual(r["peak_allocated_gib"], 8)

    def test_mfu_against_the_runs_own_peak(self):
        path = write_run(steps([500000] * 3) + [summary(gpu_name="NVIDIA A100-SXM4-80GB", peak_flops_per_gpu=312e12)])
        r = run_metrics.summarize(path, skip=0)
        self.assertEqual(r["gpu_name"], "NVIDIA A100-SXM4-80GB")
        self.assertAlmostEqual(r["mfu"], 250000 * 1e9 / 312e12)

    def test_a_given_peak_overrides_the_runs(self):
        path = write_run(steps([500000] * 3) + [summary(gpu_name="NVIDIA A100-SXM4-80GB", peak_flops_per_gpu=312e12)])
        self.assertAlmostEqual(run_metrics.summarize(path, 0, peak_tflops=500)["mfu"], 250000 * 1e9 / 500e12)

    def test_no_mfu_for_a_gpu_without_a_known_peak(self):
        path = write_run(steps([500000] * 3) + [summary(gpu_name="NVIDIA A10G")])
        self.assertNotIn("mfu", run_metrics.summarize(path, skip=0))

    def test_runs_that_name_no_gpu_take_the_h200_peak(self):
        path = write_run(steps([500000] * 3) + [summary()])
        self.assertAlmostEqual(run_metrics.summarize(path, skip=0)["mfu"], 250000 * 1e9 / 989e12)


if __name__ == "__main__":
    unittest.main()
