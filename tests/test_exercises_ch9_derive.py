"""Chapter 9's implement and derive exercises (9.7, 9.8): right answers pass, each kind of
slip is refused and says why.

Worked by hand: p = 4 ranks in blocks on 2 GPUs cross one boundary, 2m = 8 messages of a
1F1B step with m = 4 (4 activations down, 4 gradients up); round robin crosses all three,
24. One round trip sent at t0, stamped t1 = t0 + d1 + o, back at t2 = t0 + d1 + d2 allows
every offset o from t1 - t2 (d1 = t2 - t0) to t1 - t0 (d1 = 0): the middle
t1 - (t0 + t2)/2 within half the round trip (t2 - t0)/2 is exactly that interval.
"""

from __future__ import annotations

import sympy as sp

from ppbook.exercises import check, exercises
from ppbook.exercises.ch9 import crossing_messages

t0, t1, t2 = sp.symbols("t0 t1 t2")


def blocks(p, g):
    return [r // (p // g) for r in range(p)]


def test_chapter_nine_is_half_construct_implement_or_derive():
    kinds = [e.kind for e in exercises("9")]
    assert len(kinds) == 8
    assert sum(kind in ("construct", "implement", "derive") for kind in kinds) == 4


def test_9_7_blocks_of_neighbours():
    assert crossing_messages(blocks(4, 2), 4) == 8 and crossing_messages([0, 1, 0, 1], 4) == 24
    assert check("9.7", blocks)
    assert check("9.7", lambda p, g: [g - 1 - r // (p // g) for r in range(p)])  # mirrored
    robin = check("9.7", lambda p, g: [r % g for r in range(p)])
    assert "changes GPU at 3 of the 3 boundaries" in robin.message and "24" in robin.message
    # balanced but one block split in two: ranks 0 and 3 on GPU 0 cross twice, not once
    split = check("9.7", lambda p, g: [0, 1, 1, 0] if (p, g) == (4, 2) else blocks(p, g))
    assert "16 1F1B messages" in split.message and "8 is possible" in split.message
    crowded = check("9.7", lambda p, g: [0] * p)
    assert "GPU 0 holds 2 ranks" in crowded.message
    assert "is not a GPU from 0 to 0" in check("9.7", lambda p, g: [1] * p).message
    assert "a list of 2" in check("9.7", lambda p, g: [0]).message
    assert "raised KeyError" in check("9.7", lambda p, g: {}[p]).message
    assert "wants a function" in check("9.7", [0, 0, 1, 1]).message


def test_9_8_offset_and_bound():
    assert check("9.8", (t1 - (t0 + t2) / 2, (t2 - t0) / 2))
    assert check("9.8", [(2 * t1 - t0 - t2) / 2, t2 / 2 - t0 / 2])
    loose = check("9.8", (t1 - (t0 + t2) / 2, t2 - t0))
    assert "larger than the worst case" in loose.message
    tight = check("9.8", (t1 - (t0 + t2) / 2, (t2 - t0) / 4))
    assert "leaves some out" in tight.message
    sent = check("9.8", (t1 - t0, (t2 - t0) / 2))  # the stamp taken as the message left
    assert sent.status == "wrong"
    assert "wants two sympy expressions" in check("9.8", t1 - t0).message
    assert "use x" in check("9.8", (sp.Symbol("x"), t0)).message
