"""``stud replay check``: a line per replayed PHH hand, a summary, and exit status 0 only when
every hand agrees with our rules."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from studtools.cli import main

ROOT = Path(__file__).parents[3]
WSOP = sorted((ROOT / "tests" / "data" / "phh" / "wsop-2023-43").glob("*.phh"))
STUD = Path(sys.executable).parent / "stud"

HEAD = """variant = 'F7S/8'
antes = [40, 40]
bring_in = 50
small_bet = 200
big_bet = 400
starting_stacks = [1000, 1000]
"""


def write(tmp_path: Path, name: str, actions: str, extra: str = "") -> Path:
    path = tmp_path / name
    path.write_text(HEAD + f"actions = [{actions}]\n" + extra)
    return path


def run(*argv: str | Path) -> tuple[int, list[str]]:
    out = io.StringIO()
    status = main([str(a) for a in argv], out=out)
    return status, out.getvalue().splitlines()


@pytest.fixture
def ok_file(tmp_path: Path) -> Path:
    return write(tmp_path, "ok.phh", "'d dh p1 AcAd2c', 'd dh p2 KcKd9s', 'p1 pb', 'p2 f'",
                 "finishing_stacks = [1040, 960]\n")


class TestReplayCheckExitStatus:
    """Exit status 0 only when every hand of every file agrees; 1 otherwise."""

    def test_the_wsop_stud_hi_lo_hands_all_agree(self) -> None:
        status, lines = run("replay", "check", *WSOP)
        assert status == 0
        assert lines[:-1] == [f"{p}: OK" for p in WSOP]
        assert lines[-1] == "7 hands: 7 ok, 0 rejected, 0 stacks differ, 0 unchecked"

    def test_one_rejected_hand_fails_the_run(self, tmp_path: Path, ok_file: Path) -> None:
        bad = write(tmp_path, "bad.phh", "'d dh p1 AcAd2c', 'd dh p2 KcKd9s', 'p1 pb', "
                    "'p2 cbr 300'")
        status, lines = run("replay", "check", ok_file, bad)
        assert status == 1
        assert lines == [
            f"{ok_file}: OK",
            f"{bad}: REJECTED at action 4 (p2 cbr 300): wrong_amount: a complete now goes "
            "to exactly 200",
            "2 hands: 1 ok, 1 rejected, 0 stacks differ, 0 unchecked",
        ]

    def test_different_finishing_stacks_fail(self, tmp_path: Path) -> None:
        off = write(tmp_path, "off.phh", "'d dh p1 AcAd2c', 'd dh p2 KcKd9s', 'p1 pb', 'p2 f'",
                    "finishing_stacks = [1050, 950]\n")
        status, lines = run("replay", "check", off)
        assert status == 1
        assert lines[0] == f"{off}: STACKS DIFFER: ours [1040, 960] vs file [1050, 950]"

    def test_unreadable_or_other_games_are_unchecked(self, tmp_path: Path) -> None:
        razz = write(tmp_path, "razz.phh", "'d dh p1 AcAd2c', 'd dh p2 KcKd9s'")
        razz.write_text(razz.read_text().replace("F7S/8", "FR"))
        missing = tmp_path / "missing.phh"
        status, lines = run("replay", "check", razz, missing)
        assert status == 1
        assert lines[0] == (f"{razz}: UNCHECKED: variant 'FR' is not seven card stud hi/lo "
                            "('F7S/8')")
        assert lines[1].startswith(f"{missing}: UNCHECKED: ") and "No such file" in lines[1]

    def test_file_ending_mid_hand_is_rejected_at_its_end(self, tmp_path: Path) -> None:
        cut = write(tmp_path, "cut.phh", "'d dh p1 AcAd2c', 'd dh p2 KcKd9s', 'p1 pb'")
        status, lines = run("replay", "check", cut)
        assert status == 1
        assert lines[0] == (f"{cut}: REJECTED at the end of the actions: hand_not_over: the "
                            "file ends but seat 2 is still to act on 3rd street")

    def test_hand_without_finishing_stacks_is_ok(self, tmp_path: Path) -> None:
        bare = write(tmp_path, "bare.phh", "'d dh p1 AcAd2c', 'd dh p2 KcKd9s', 'p1 pb', 'p2 f'")
        assert run("replay", "check", bare) == (0, [
            f"{bare}: OK (no finishing_stacks)",
            "1 hand: 1 ok, 0 rejected, 0 stacks differ, 0 unchecked"])


class TestReplayCheckOutput:
    """Several hands in one file, notes and our hand history on request."""

    def test_each_hand_of_a_phhs_file_gets_a_line(self, tmp_path: Path, ok_file: Path) -> None:
        both = tmp_path / "both.phhs"
        both.write_text("[1]\n" + ok_file.read_text() + "\n[2]\n" + ok_file.read_text())
        status, lines = run("replay", "check", both)
        assert status == 0 and lines[:2] == [f"{both}[1]: OK", f"{both}[2]: OK"]

    def test_verbose_prints_notes_and_history_prints_our_log(self) -> None:
        status, lines = run("replay", "check", "-v", "--history", WSOP[1])
        assert status == 0
        assert "  note: p1's 3rd street up card is not recorded; As stands in for it" in lines
        assert "  | Seat 4 brings in for 75,000" in lines
        assert "  | Seat 3 completes to 250,000" in lines


class TestStudCommandLine:
    """The ``stud`` console script and argparse usage errors."""

    def test_console_script_runs(self) -> None:
        done = subprocess.run([str(STUD), "replay", "check", str(WSOP[0])],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == f"{WSOP[0]}: OK"

    @pytest.mark.parametrize("argv", [[], ["replay"], ["replay", "check"], ["nope"]])
    def test_usage_errors_exit_2(self, argv: list[str]) -> None:
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
