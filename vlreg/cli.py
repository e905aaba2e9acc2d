"""The ``vlreg`` command."""

from __future__ import annotations

import argparse
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vlreg", description="vlreg: standardized tracing of vision-language models")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="build a small checkpoint, trace it, print what was read")
    demo.add_argument("--checkpoint", default="qwen2_vl", help="a checkpoint builder's name (default: qwen2_vl)")
    arguments = parser.parse_args(argv)
    if arguments.command == "demo":
        from .demo import run

        run(arguments.checkpoint)
    return 0
