#!/usr/bin/env python3
"""bench/kernel_timeline/idle_gaps.py on traces whose idle intervals are known by construction."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "kernel_timeline"))
import idle_gaps  # noqa: E402


def trace(*rows):
    return [f"{kind}\t{start}\t{end}\t{graph}\t{name}\n" for kind, start, end, graph, name in rows]


class IdleGapsTest(unittest.TestCase):
    def test_gaps_between_back_to_back_activities(self):
        activities = idle_gaps.read_trace(trace(
            ("kernel", 0, 10_000, 1, "a"),
            ("memset", 11_500, 12_300, 1, "memset"),
            ("kernel", 15_000, 20_000, 1, "b"),
            ("memcpy", 20_000, 21_000, 0, "memcpy"),  # starts as b ends: no gap
            ("kernel", 121_000, 130_000, 2, "c"),
        ))
        gaps = idle_gaps.idle_gaps(activities)
        self.assertEqual([g.ns for g in gaps], [1_500, 2_700, 100_000])
        self.assertEqual([(g.before.name, g.after.name) for g in gaps], [("a", "memset"), ("memset", "b"),
                                                                      ("memcpy", "c")])
        self.assertEqual(idle_gaps.place(gaps[0]), "kernel -> memset, inside a graph")
        self.assertEqual(idle_gaps.place(gaps[2]), "memcpy -> kernel, between graphs or outside")
        self.assertEqual([idle_gaps.size_bucket(g.ns) for g in gaps], ["1-2 us", "2-5 us", "20-200 us"])

    def test_overlapping_activities_leave_no_gap_until_the_latest_end(self):
        # Two streams: b runs inside a's span, c starts after a's end, not after b's.
        activities = idle_gaps.read_trace(trace(
            ("kernel", 5_000, 8_000, 0, "b"),
            ("kernel", 0, 10_000, 0, "a"),
            ("kernel", 10_400, 11_000, 0, "c"),
        ))
        self.assertEqual([a.name for a in activities], ["a", "b", "c"])  # ordered by start
        gaps = idle_gaps.idle_gaps(activities)
        self.assertEqual([(g.ns, g.before.name, g.after.name) for g in gaps], [(400, "a", "c")])

    def test_totals_sum_per_key_costliest_first(self):
        activities = idle_gaps.read_trace(trace(
            ("kernel", 0, 1_000, 1, "x"), ("kernel", 1_300, 2_000, 1, "y"),
            ("kernel", 2_600, 3_000, 1, "x"), ("kernel", 3_200, 4_000, 1, "y")))
        by_pair = idle_gaps.totals(idle_gaps.idle_gaps(activities), lambda g: (g.before.name, g.after.name))
        self.assertEqual(by_pair[0][0], ("y", "x"))
        self.assertEqual(by_pair[0][1][0], 1)
        self.assertAlmostEqual(by_pair[0][1][1], 0.0006)  # ms
        self.assertEqual(by_pair[1][0], ("x", "y"))
        self.assertEqual(by_pair[1][1][0], 2)
        self.assertAlmostEqual(by_pair[1][1][1], 0.0005)  # 300 + 200 ns

    def test_kernel_names_from_mangled_names(self):
        mangled = ("_ZN7adamant7kernels4cuda9launchers47_GLOBAL__N__f7d723bc_14_column_sums_cu_dffeb674"
                   "17add_slices_kernelEPKfllPf")
        self.assertEqual(idle_gaps.short_name(mangled), "add_slices_kernel")
        self.assertEqual(idle_gaps.short_name("nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT"),
                         "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT")
        self.assertEqual(idle_gaps.short_name("void fill<float>(float*, int)"), "void fill")

    def test_malformed_line_names_its_number(self):
        with self.assertRaisesRegex(ValueError, "line 2: 3 tab-separated fields, expected 6"):
            idle_gaps.read_trace(["kernel\t0\t1\t0\ta\n", "kernel\t2\t3\n"])

    def test_host_calls_show_the_gaps_the_gpu_waited_for_the_host(self):
        # Rows of the tracer's six fields. b's graph launch starts 30 us after a ends: 30 of the
        # 40 us gap are the host's; c was issued long before its gap opened.
        lines = [f"{kind}\t{start}\t{end}\t{graph}\t{corr}\t{name}\n" for kind, start, end, graph, corr, name in (
            ("api", -5_000, -4_000, 0, 1, "cudaLaunchKernel"),
            ("kernel", 0, 10_000, 0, 1, "a"),
            ("api", 12_000, 35_000, 0, 9, "cudaStreamSynchronize"),
            ("api", 20_000, 21_000, 0, 3, "cudaLaunchKernel"),
            ("api", 40_000, 45_000, 0, 2, "cudaGraphLaunch"),
            ("kernel", 50_000, 60_000, 7, 2, "b"),
            ("kernel", 61_000, 70_000, 0, 3, "c"),
        )]
        activities = idle_gaps.read_trace(lines)
        self.assertEqual([a.name for a in activities], ["a", "b", "c"])
        self.assertEqual([a.correlation for a in activities], [1, 2, 3])
        calls = idle_gaps.read_host_calls(lines)
        self.assertEqual([c.name for c in calls], ["cudaLaunchKernel", "cudaStreamSynchronize", "cudaLaunchKernel",
                                                   "cudaGraphLaunch"])
        gaps = idle_gaps.idle_gaps(activities)
        self.assertEqual([g.ns for g in gaps], [40_000, 1_000])
        late = idle_gaps.host_late(gaps, calls)
        self.assertEqual([(g.after.name, call.name, ns) for g, call, ns in late], [("b", "cudaGraphLaunch", 30_000)])
        during = idle_gaps.calls_during(calls, 10_000, 40_000)
        self.assertEqual([c.name for c in during], ["cudaStreamSynchronize", "cudaLaunchKernel"])

    def test_older_traces_have_no_correlation(self):
        activities = idle_gaps.read_trace(trace(("kernel", 0, 1_000, 3, "a")))
        self.assertEqual(activities[0].correlation, 0)
        self.assertEqual(activities[0].graph, 3)
        self.assertEqual(idle_gaps.read_host_calls(trace(("kernel", 0, 1_000, 3, "a"))), [])


if __name__ == "__main__":
    unittest.main()
