"""Chapter 2's exercise checks: right answers pass, typical wrong ones get their hint."""

from ppbook.schedules.exercises import (
    check_gpipe_with_comm,
    check_one_f_one_b_by_hand,
    check_smallest_m,
)


def test_gpipe_with_comm(capsys):
    assert check_gpipe_with_comm(34.5)
    assert not check_gpipe_with_comm(33)
    assert "without communication" in capsys.readouterr().out
    assert not check_gpipe_with_comm(34.0)
    assert "Too small by 0.5" in capsys.readouterr().out
    assert not check_gpipe_with_comm(None)


def test_smallest_m(capsys):
    assert check_smallest_m(16)
    assert not check_smallest_m(20)
    assert "so does m = 16" in capsys.readouterr().out
    assert not check_smallest_m(12)
    assert "not below 0.1" in capsys.readouterr().out
    assert not check_smallest_m(14)
    assert "multiple of p = 4" in capsys.readouterr().out


def test_one_f_one_b_by_hand(capsys):
    right = [["0F0", "0F1", "0B0", "0F2", "0B1", "0B2"], ["1F0", "1B0", "1F1", "1B1", "1F2", "1B2"]]
    assert check_one_f_one_b_by_hand(right)
    gpipe_rows = [["0F0", "0F1", "0F2", "0B0", "0B1", "0B2"],
                  ["1F0", "1F1", "1F2", "1B0", "1B1", "1B2"]]  # fmt: skip
    assert not check_one_f_one_b_by_hand(gpipe_rows)
    assert "holds 3 activations" in capsys.readouterr().out
    assert not check_one_f_one_b_by_hand([["0F0", "0X0"]])
    assert "Not a valid schedule" in capsys.readouterr().out
