"""bench/card_check.sh turns each check program's output into PASS/FAIL/SKIP
lines (check_lines); a case it cannot read is a check lost from the card
run. Runs that shell function, as written in the script, on GoogleTest
output of plain and parameterized cases."""

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "card_check.sh"

GTEST_OUTPUT = """\
[ RUN      ] Cards/Elementwise.Widen/0
[       OK ] Cards/Elementwise.Widen/0 (3 ms)
[ RUN      ] Cards/Elementwise.Widen/1
[  FAILED  ] Cards/Elementwise.Widen/1, where GetParam() = 4-byte object <01-00 00-00> (5 ms)
[  SKIPPED ] Cards/Elementwise.Widen/2, where GetParam() = 2 (0 ms)
[       OK ] Plain.Case (1 ms)
[  FAILED  ] Cards/Elementwise.Widen/1, where GetParam() = 4-byte object <01-00 00-00>
PASS adamw_vs_copy: copy 1.0 ms / AdamW 1.1 ms
"""


def test_every_case_becomes_one_check_line(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text(GTEST_OUTPUT)
    program = ('eval "$(sed -n \'/^check_lines()/,/^}/p\' "$1")"; check_lines "$2"')
    lines = subprocess.run(["bash", "-c", program, "-", str(SCRIPT), str(out)],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert lines == [
        "PASS Cards/Elementwise.Widen/0",
        "FAIL Cards/Elementwise.Widen/1: see the output above",
        "SKIP Cards/Elementwise.Widen/2: skipped by GoogleTest",
        "PASS Plain.Case",
        "PASS adamw_vs_copy: copy 1.0 ms / AdamW 1.1 ms",
    ]
