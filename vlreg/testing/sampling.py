"""Samples that change from run to run and repeat on demand.

A check over many values (every value written, every block of a real geometry) costs a
trace each; the suite checks a sample of them per run instead, chosen from the run's seed,
so that over runs every value is checked and a failing sample is one environment variable
away: ``VLREG_TEST_SEED=<the seed the failure names>``. ``VLREG_TEST_SAMPLES=all`` checks
every value instead (minutes more).
"""

from __future__ import annotations

import os
import random
from typing import Sequence, TypeVar

T = TypeVar("T")

#: The environment variable that fixes the run's seed.
VARIABLE = "VLREG_TEST_SEED"
#: The environment variable that, set to ``all``, makes every sample the whole.
EVERYTHING = "VLREG_TEST_SAMPLES"


def seed() -> int:
    """The run's seed: ``$VLREG_TEST_SEED``, else one drawn now and put there, so that the
    processes this one starts (pytest-xdist's workers, a subprocess) draw the same samples."""
    value = os.environ.get(VARIABLE, "").strip()
    if not value:
        value = str(random.SystemRandom().randrange(10**6))
        os.environ[VARIABLE] = value
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{VARIABLE}={value!r}: set it to a whole number (the seed a failing run printed)") from None


def sample(items: Sequence[T], size: int, key: str) -> list[T]:
    """``size`` of ``items`` in their order, drawn from the run's seed and ``key`` (what is
    sampled, so two checks draw independently); all of them where there are no more, or
    where ``$VLREG_TEST_SAMPLES`` is ``all``."""
    if len(items) <= size or os.environ.get(EVERYTHING, "").strip().lower() == "all":
        return list(items)
    chosen = sorted(random.Random(f"{seed()} {key}").sample(range(len(items)), size))
    return [items[index] for index in chosen]


def repeat() -> str:
    """How to draw this run's samples again, for a failure's message."""
    return f"{VARIABLE}={seed()} repeats this run's samples"
