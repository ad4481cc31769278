"""The grader's fixture notebooks are data, never tests: nbval must not run them (the hostile
ones loop for ever, fork without end and vandalise files outside any sandbox)."""

collect_ignore_glob = ["*.ipynb"]
