"""`rewrite` command line: one short function per subcommand, no logic of its own.

Exit status: 0 optimized and verified; 1 a `RewriteError` (one line on stderr, nothing
written); 2 usage error; 3 the optimized model failed verification or a stage failed, so the
input graph was written to the output path unchanged (the report says why).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rewrite.errors import RewriteError
from rewrite.report import STATUS_OPTIMIZED
from rewrite.rules.saturate import Limits

EXIT_FALLBACK = 3


def _builtin_rulesets() -> dict[str, object]:
    from rulesets.cleanup import CLEANUP

    return {CLEANUP.name: CLEANUP}


def cmd_optimize(args: argparse.Namespace) -> int:
    from rewrite.pipeline import Options, optimize

    builtins = _builtin_rulesets()
    rulesets = None
    if args.no_rules:
        rulesets = []
    elif args.ruleset:
        unknown = [r for r in args.ruleset if r not in builtins]
        if unknown:
            raise RewriteError(
                f"unknown ruleset {', '.join(unknown)}; built-in rulesets: {', '.join(builtins)}"
            )
        rulesets = [builtins[r] for r in args.ruleset]
    opts = Options(
        rulesets=rulesets,  # type: ignore[arg-type]
        fold=not args.no_fold,
        limits=Limits(args.iter_limit, args.node_limit, args.time_limit),
        target=args.target,
        verify=not args.no_verify,
        seed=args.seed,
        trials=args.trials,
        inputs=args.inputs,
    )
    report = optimize(args.input, args.output, opts)
    if args.report:
        report.write(args.report)
    if not args.quiet:
        print(report.summary())
    if report.status != STATUS_OPTIMIZED:
        for w in report.warnings:
            print(f"rewrite: warning: {w}", file=sys.stderr)
        return EXIT_FALLBACK
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rewrite", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    o = sub.add_parser("optimize", help="optimize an ONNX model")
    o.add_argument("input", help="the model to optimize (never modified)")
    o.add_argument("output", help="where to write the optimized model")
    o.add_argument("--report", metavar="JSON", help="write the report as JSON here")
    o.add_argument(
        "--ruleset",
        action="append",
        metavar="NAME",
        help="built-in rule set to use (repeatable; default: all)",
    )
    o.add_argument(
        "--no-rules",
        action="store_true",
        help="apply no rules (round trip through the e-graph only)",
    )
    o.add_argument("--no-fold", action="store_true", help="do not fold constant subgraphs")
    o.add_argument(
        "--iter-limit",
        type=int,
        default=Limits.iterations,
        help="saturation iterations (default %(default)s)",
    )
    o.add_argument(
        "--node-limit", type=int, default=Limits.nodes, help="e-graph e-nodes (default %(default)s)"
    )
    o.add_argument(
        "--time-limit",
        type=float,
        default=Limits.seconds,
        help="saturation seconds (default %(default)s)",
    )
    o.add_argument(
        "--target",
        choices=["cpu", "cuda"],
        default="cpu",
        help="cost model target (default %(default)s)",
    )
    o.add_argument(
        "--no-verify", action="store_true", help="skip the differential check (not recommended)"
    )
    o.add_argument("--seed", type=int, default=0, help="seed of the random check inputs")
    o.add_argument("--trials", type=int, default=2, help="random input sets checked")
    o.add_argument("--inputs", metavar="NPZ", help="also check on these inputs (.npz)")
    o.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    o.set_defaults(func=cmd_optimize)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except RewriteError as e:
        print(f"rewrite: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("rewrite: interrupted; nothing was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
