"""``zoframe reproduce admm`` (filled in below)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true")


def run(args: argparse.Namespace) -> int:
    raise SystemExit("not yet available")
