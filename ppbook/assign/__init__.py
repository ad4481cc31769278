"""Course assignments (issue 10): student copies without the solutions
(:mod:`ppbook.assign.build`), a grader that runs a submission in a fresh, walled-in kernel and
scores it (:mod:`ppbook.assign.grade`, walls in :mod:`ppbook.assign.sandbox`), and the
questions of each assignment (:mod:`ppbook.assign.questions`).

Nothing here is imported by ``import ppbook``; the command is ``ppbook assign``.
"""
