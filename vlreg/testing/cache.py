"""Where `vlreg.testing` keeps what it trains when asked to (a toy recipe other than the
shipped one): ``$VLREG_CACHE`` if set, else ``~/.cache/vlreg``.

Each entry is made once: under an exclusive lock on a file beside it, so processes
started at once train it once (the others wait, then find it), and into a scratch path
renamed when complete, so a killed run leaves nothing half made.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator


def root() -> Path:
    """``$VLREG_CACHE`` if set, else ``~/.cache/vlreg``."""
    return Path(os.environ.get("VLREG_CACHE", Path.home() / ".cache" / "vlreg")).expanduser()


@contextmanager
def locked(target: Path, what: str) -> Iterator[None]:
    """Hold the lock on ``target`` (the file ``.<name>.lock`` beside it) for the block;
    while another process holds it, say so (``what`` names the work) and wait."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(f".{target.name}.lock"), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another process to finish {what} ({target}) ...", file=sys.stderr, flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def once(target: Path, make: Callable[[Path], Any], what: str) -> Path:
    """``target``, made by ``make(scratch)`` if it is absent (``make`` writes a file or a
    folder at ``scratch``, which is renamed to ``target`` when it returns)."""
    if target.exists():
        return target
    with locked(target, what):
        if not target.exists():  # not made while this process waited
            scratch = target.with_name(f".{target.name}-{os.getpid()}")
            try:
                make(scratch)
                scratch.rename(target)
            finally:
                if scratch.is_dir():
                    shutil.rmtree(scratch, ignore_errors=True)
                else:
                    scratch.unlink(missing_ok=True)
    return target
