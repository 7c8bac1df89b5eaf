#!/usr/bin/env python3
"""bench/kernel_timeline/kernel_phases.py on launch sequences whose phases are known by construction."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "kernel_timeline"))
import kernel_phases  # noqa: E402


class KernelPhasesTest(unittest.TestCase):
    def test_calls_of_one_kernel_then_of_three(self):
        launches = [("forward", 100)] * 4 + [("statistics", 10), ("key", 50), ("query", 40)] * 3
        found = kernel_phases.phases(launches)
        self.assertEqual([p.cycle for p in found], [("forward",), ("statistics", "key", "query")])
        self.assertEqual(found[0].repeats, [[100]] * 4)
        self.assertEqual(found[1].repeats, [[10, 50, 40]] * 3)

    def test_a_different_instantiation_starts_a_phase(self):
        # The backward timed twice: the second time its key pass is another instantiation.
        launches = [("statistics", 10), ("key<64, 1, 0>", 50), ("query", 40)] * 2 + \
                   [("statistics", 11), ("key<64, 1, 1>", 60), ("query", 30)] * 2
        found = kernel_phases.phases(launches)
        self.assertEqual([p.cycle[1] for p in found], ["key<64, 1, 0>", "key<64, 1, 1>"])
        self.assertEqual(found[1].repeats, [[11, 60, 30]] * 2)

    def test_a_cycle_cut_short_ends_its_phase(self):
        launches = [("a", 1), ("b", 2)] * 2 + [("a", 3), ("c", 4)]
        found = kernel_phases.phases(launches)
        self.assertEqual([(p.cycle, len(p.repeats)) for p in found],
                         [(("a", "b"), 2), (("a", "c"), 1)])

    def test_labels_carry_template_arguments(self):
        mangled = ("_ZN7adamant7kernels4cuda25flash_attention_launchers12_GLOBAL__N_125flash_backward_key_kernel"
                   "ILi64ELb1ELb0EEEvNS2_12BackwardMapsE")
        self.assertEqual(kernel_phases.kernel_label(mangled), "flash_backward_key_kernel<64, 1, 0>")
        self.assertEqual(kernel_phases.kernel_label("memcpy"), "memcpy")


if __name__ == "__main__":
    unittest.main()
