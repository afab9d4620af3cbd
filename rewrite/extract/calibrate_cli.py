"""`rewrite calibrate` on the command line: the full calibration (`calibrate.py`) or, with
`--only OP`, a refit of one op's multipliers in an existing table (`refit.py`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rewrite.extract.calibrate import EP_OF, calibrate, check_out, summary
from rewrite.extract.refit import ROUNDS, refit, refit_summary
from rewrite.extract.table import cache_path


def cmd_calibrate(args: argparse.Namespace) -> int:
    """`rewrite calibrate`: measure, fit, write the table, print a summary; 0 on success."""
    out = Path(args.out) if getattr(args, "out", None) else None
    check_out(out)
    if getattr(args, "only", None):
        return cmd_refit(args)
    table = calibrate(
        args.target, threads=args.threads, quick=args.quick, out=out, rounds=args.rounds
    )
    print(summary(table, out or cache_path(table.key)))
    return 0


def cmd_refit(args: argparse.Namespace) -> int:
    """`rewrite calibrate --only OP ...`: refit, write the table, print both summaries."""
    table, path = refit(
        args.only,
        args.target,
        threads=args.threads,
        base=Path(args.base) if args.base else None,
        out=Path(args.out) if args.out else None,
        rounds=args.rounds or ROUNDS,
    )
    print(summary(table, path) + "\n" + refit_summary(table))
    return 0


def add_calibrate_parser(subparsers: Any) -> None:
    """Register `calibrate` on the CLI's subparsers (sets `func=cmd_calibrate`)."""
    p = subparsers.add_parser(
        "calibrate",
        help="time ORT on this machine and fit the cost model",
        description="Time single-op ORT sessions and fit the cost model's numbers; the table "
        "is cached per machine, ORT version, EP and thread count and used by `optimize`.",
    )
    p.add_argument("--target", choices=sorted(EP_OF), default="cpu", help="EP (default cpu)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1)")
    p.add_argument("--quick", action="store_true", help="a handful of cases (seconds; tests)")
    p.add_argument("--out", metavar="JSON", help="write here instead of the user cache")
    p.add_argument(
        "--rounds",
        type=int,
        metavar="N",
        help="interleaved timing rounds (default 15; 5 with --quick; 200 with --only)",
    )
    p.add_argument(
        "--only",
        metavar="OP",
        action="append",
        help="time only OP's cases and refit only its multipliers in --base (repeatable)",
    )
    p.add_argument("--base", metavar="JSON", help="table --only refits (default: the shipped one)")
    p.set_defaults(func=cmd_calibrate)
