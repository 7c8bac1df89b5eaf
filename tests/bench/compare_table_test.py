#!/usr/bin/env python3
"""bench/compare_table.py on results folders laid out as bench/compare_builds.sh leaves them."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import compare_table  # noqa: E402


def write(folder, name, record):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name + ".json"), "w") as f:
        json.dump(record, f)


def ours(tokens_per_s, peak=7.4, mfu=0.466):
    return {"status": "ok", "tokens_per_s": tokens_per_s, "peak_allocated_gib": peak, "mfu": mfu}


class CompareTableTest(unittest.TestCase):
    def setUp(self):
        self.results = tempfile.mkdtemp()

    def cells(self, case):
        return [cell.strip() for cell in compare_table.row(self.results, case).strip("|").split("|")]

    def test_gain_is_of_the_medians_and_the_ratio_of_the_after_median(self):
        case = os.path.join(self.results, "126m:dropout")
        write(os.path.join(case, "before-1"), "ours-126m-g1", ours(400000))
        write(os.path.join(case, "before-2"), "ours-126m-g1", ours(410000))
        write(os.path.join(case, "before-3"), "ours-126m-g1", ours(420000))
        write(os.path.join(case, "after-1"), "ours-126m-g1", ours(451000))
        write(os.path.join(case, "after-2"), "ours-126m-g1", ours(440000, peak=7.2, mfu=0.5))
        write(os.path.join(case, "after-10"), "ours-126m-g1", ours(430000, peak=7.3, mfu=0.48))
        write(os.path.join(case, "peer"), "peer-single-126m", {"tokens_per_s": 400000, "peak_gib": 8.7})
        cells = self.cells("126m:dropout")
        self.assertEqual(cells[0], "GPT-3 126M")
        self.assertEqual(cells[1], "0.1 / 0.1")
        self.assertEqual(cells[2], "400,000, 410,000, 420,000")
        self.assertEqual(cells[3], "451,000, 440,000, 430,000")  # round 10 after round 2
        self.assertEqual(cells[4], "+7.3%")  # 440,000 / 410,000 - 1
        self.assertEqual(cells[5], "400,000")
        self.assertEqual(cells[6], "**1.10x**")
        self.assertEqual(cells[7:], ["7.3", "8.7", "48.0%"])  # the last round's peak and MFU

    def test_failed_skipped_and_missing_runs_are_named_not_counted(self):
        case = os.path.join(self.results, "1.3b:seq8192:mb2")
        write(os.path.join(case, "before-1"), "ours-1.3b-g1", {"status": "did not fit"})
        write(os.path.join(case, "after-1"), "ours-1.3b-g1", ours(60000, peak=29.5, mfu=0.557))
        write(os.path.join(case, "after-2"), "skipped", {"status": "skipped (time budget)"})
        cells = self.cells("1.3b:seq8192:mb2")
        self.assertEqual(cells[0], "GPT-3 1.3B, sequence 8192, micro-batch 2")
        self.assertEqual(cells[1], "0 / 0")
        self.assertEqual(cells[2], "did not fit")
        self.assertEqual(cells[3], "60,000, skipped (time budget)")
        self.assertEqual(cells[4], "")  # no gain without a before figure
        self.assertEqual(cells[5], "not run")
        self.assertEqual(cells[6], "")
        self.assertEqual(cells[7:], ["29.5", "", "55.7%"])

    def test_table_has_a_header_and_a_row_per_case_in_order(self):
        lines = compare_table.table(self.results, ["126m", "1.3b:dropout"]).splitlines()
        self.assertEqual(len(lines), 4)
        self.assertEqual(lines[0].count("|"), lines[1].count("|"))
        self.assertEqual(lines[1].count("|"), lines[2].count("|"))
        self.assertTrue(lines[2].startswith("| GPT-3 126M | 0 / 0 | not run | not run |"))
        self.assertTrue(lines[3].startswith("| GPT-3 1.3B | 0.1 / 0.1 |"))

    def test_the_gelu_parts_name_the_form_and_where_it_runs(self):
        self.assertEqual(compare_table.describe("126m:dropout:tanh"), ("GPT-3 126M, tanh GELU", "0.1 / 0.1"))
        self.assertEqual(compare_table.describe("1.3b:mb8:fused"),
                         ("GPT-3 1.3B, micro-batch 8, tanh GELU in the GEMM epilogues", "0 / 0"))


if __name__ == "__main__":
    unittest.main()
