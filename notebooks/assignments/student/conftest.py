"""The student copies raise NotImplementedError until a student fills them in, so nbval
does not run them; the grader's tests do (tests/test_assign_real.py)."""

collect_ignore_glob = ["*.ipynb"]
