#!/usr/bin/env python3
"""bench/kernel_timeline/kernel_parts.py on traces whose per-step kernel time is known by construction."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "kernel_timeline"))
import idle_gaps  # noqa: E402
import kernel_parts  # noqa: E402

# Mangled as the CUDA compiler names Adamant's kernels: every one sits in namespace adamant.
OURS_ATTENTION = "_ZN7adamant7kernels4cuda10flash_attn31flash_backward_key_wgmma_kernelILi64EEEvv"
OURS_ADAM = "_ZN7adamant7kernels4cuda9launchers11adam_kernelILi0EEEvPf"
OURS_RESIDUAL = "_ZN7adamant7kernels4cuda19residual_add_kernelEPKt"
OURS_MARKER = "_ZN7adamant7kernels4cuda34embedding_position_backward_kernelILi8EEEvv"


def activity(kind, start, end, name):
    return idle_gaps.Activity(start, end, kind, 0, name)


def step(t0, marker=OURS_MARKER):
    """One step from t0 (ns): 3 us of attention, 2 of adam, 1 of residual add, a 4 us GEMM, a
    1 us memset, then the marker (0.5 us, other kernels); 12 us long."""
    return [activity("kernel", t0, t0 + 3000, OURS_ATTENTION),
            activity("kernel", t0 + 3000, t0 + 5000, OURS_ADAM),
            activity("kernel", t0 + 5000, t0 + 6000, OURS_RESIDUAL),
            activity("kernel", t0 + 6000, t0 + 10000, "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"),
            activity("memset", t0 + 10000, t0 + 11000, "memset"),
            activity("kernel", t0 + 11000, t0 + 11500, marker)]


class KernelPartsTest(unittest.TestCase):
    def test_parts_of_adamant_and_pytorch_kernels(self):
        names = {
            OURS_ATTENTION: "attention",
            "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_kernel0_0": "attention",
            "_ZN5cudnn6fusion20convert_dq_to_16bitsILb1EEEvPKvPv": "attention",
            "nvjet_sm90_tss_128x160_64x5_2x1_v_bx_splitK_NTT": "GEMMs",
            "_ZN8cublasLt19splitKreduce_kernelILi32ELi16EiffffLb0EEEvv": "GEMMs",
            "_ZN7adamant7kernels4cuda25cross_entropy_staged_rows_kernelILi8EEEvv": "cross-entropy",
            "triton_red_fused__log_softmax__log_softmax_backward_data_nll_loss_backward_0": "cross-entropy",
            "_ZN7adamant7kernels4cuda24layernorm_forward_kernelILi8EEEvv": "layer norm",
            "triton_per_fused__to_copy_add_native_layer_norm_backward_view_9": "layer norm",
            OURS_ADAM: "optimizer",  # by its own name, not by the namespace every kernel of ours has
            "_ZN2at6native25multi_tensor_apply_kernelINS1_32FusedOptimizerTensorListMetadataEEEvv": "optimizer",
            OURS_RESIDUAL: "other kernels",
            "triton_poi_fused_gelu_view_8": "other kernels",
        }
        for name, part in names.items():
            self.assertEqual(kernel_parts.part_of(activity("kernel", 0, 1, name)), part, name)
        self.assertEqual(kernel_parts.part_of(activity("memcpy", 0, 1, "memcpy")), "memcpys")

    def test_sums_the_last_whole_steps_per_step(self):
        # A warm-up step of a slow attention, then three steps; the default marker of either program.
        warm_up = [activity("kernel", 0, 50_000, OURS_ATTENTION), activity("kernel", 50_000, 50_500, OURS_MARKER)]
        steps = step(100_000) + step(200_000) + step(300_000)
        window, count = kernel_parts.steps_window(warm_up + steps, kernel_parts.DEFAULT_MARKER, last=8)
        self.assertEqual(count, 3)  # four markers: three whole steps, the warm-up's attention before them
        totals = kernel_parts.per_step(window, count, kernel_parts.part_of)
        self.assertAlmostEqual(totals["attention"][0], 0.003)
        self.assertAlmostEqual(totals["optimizer"][0], 0.002)
        self.assertAlmostEqual(totals["GEMMs"][0], 0.004)
        self.assertAlmostEqual(totals["other kernels"][0], 0.0015)  # the residual add and the marker
        self.assertAlmostEqual(totals["memsets"][0], 0.001)
        self.assertEqual(totals["attention"][1], 1.0)  # launches a step

        window, count = kernel_parts.steps_window(warm_up + steps, kernel_parts.DEFAULT_MARKER, last=1)
        self.assertEqual(count, 1)
        self.assertEqual(len(window), 6)  # the last step's activities alone

    def test_a_pytorch_trace_steps_at_its_loss_gradient(self):
        marker = "triton_red_fused__log_softmax_backward_data_nll_loss_backward_nll_loss_forward_0"
        window, count = kernel_parts.steps_window(step(0, marker) + step(20_000, marker), kernel_parts.DEFAULT_MARKER,
                                                  last=8)
        self.assertEqual(count, 1)
        self.assertEqual(kernel_parts.per_step(window, count, kernel_parts.part_of)["cross-entropy"][0], 0.0005)

    def test_a_trace_without_two_markers_is_refused(self):
        with self.assertRaisesRegex(ValueError, "1 step marker"):
            kernel_parts.steps_window(step(0), kernel_parts.DEFAULT_MARKER, last=8)


if __name__ == "__main__":
    unittest.main()
