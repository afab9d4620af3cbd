"""`rewrite` command line: one short function per subcommand, no logic of its own.

Exit status: 0 optimized and verified; 1 a `RewriteError` (one line on stderr, nothing
written); 2 usage error; 3 the optimized model failed verification or a stage failed, so the
input graph was written to the output path unchanged (the report says why).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

from rewrite.errors import RewriteError
from rewrite.limits import DEFAULT_TIME_LIMIT, MEMORY_FRACTION, Limits, default_max_memory_mb
from rewrite.report import STATUS_NOT_FASTER, STATUS_OPTIMIZED

EXIT_FALLBACK = 3


def _dim(text: str) -> tuple[str, int]:
    """`NAME=N` (N >= 1) -> (NAME, N); argparse reports a ValueError as a usage error."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip().isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected NAME=N with N >= 1, got {text!r}")
    return name.strip(), int(value)


def cmd_optimize(args: argparse.Namespace) -> int:
    if not args.no_isolate:
        from rewrite.isolate import warm_up

        warm_up()  # the worker's fork server preloads while this process loads the model
    from rewrite.pipeline import Options, optimize
    from rewrite.rules.load import select_rulesets

    rulesets = select_rulesets(
        rule_files=args.rules or (),
        names=args.ruleset,
        disabled=args.disable_rule or (),
        allow_approximate=args.allow_approximate,
        no_rules=args.no_rules,
        target=args.target,
    )
    opts = Options(
        rulesets=rulesets,
        fold=not args.no_fold,
        limits=Limits(
            iterations=args.iter_limit,
            nodes=args.node_limit,
            seconds=None,  # saturation gets what --time-limit leaves
            memory_mb=args.max_memory,
            match_limit=args.match_limit,
        ),
        target=args.target,
        dims=dict(args.dim or ()),
        verify=not args.no_verify,
        seed=args.seed,
        trials=args.trials,
        inputs=args.inputs,
        time_limit=args.time_limit if args.time_limit > 0 else None,
        isolate=not args.no_isolate,
        extractor=args.extractor,
        extract_time_limit=args.ilp_time_limit,
        prove_rules=not args.trust_rules,
        allow_approximate=args.allow_approximate,
        measure=args.measure,
        measure_threads=args.measure_threads,
        precision=args.precision,
        max_error=args.max_error,
        metric=args.metric,
        calibration=tuple(args.calibration or ()),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = optimize(args.input, args.output, opts)
    for caught_warning in caught:  # Python warnings become report notes, not stderr lines
        text = str(caught_warning.message)
        note = text.splitlines()[0] if text else caught_warning.category.__name__
        if note not in report.notes:
            report.notes.append(note)
    if args.report:
        report.write(args.report)
    if not args.quiet:
        print(report.summary())
    if report.status != STATUS_OPTIMIZED:
        for w in report.warnings:
            print(f"rewrite: warning: {one_line(w)}", file=sys.stderr)
        return 0 if report.status == STATUS_NOT_FASTER else EXIT_FALLBACK
    return 0


def _chosen_rulesets(args: argparse.Namespace) -> list:  # type: ignore[type-arg]
    """The rule sets chosen, each rule with the domain `optimize` compiles it to."""
    from dataclasses import replace

    from rewrite.rules.load import select_rulesets
    from rewrite.rules.rule import RuleSet
    from rewrite.verify.bound import rule_domain

    chosen = select_rulesets(
        rule_files=args.rules or (), names=args.ruleset, allow_approximate=True
    )
    return [
        RuleSet(rs.name, [replace(r, domain=rule_domain(r)) for r in rs], rs.doc) for rs in chosen
    ]


def cmd_rules_list(args: argparse.Namespace) -> int:
    from rewrite.rules.explain import list_rules

    print(list_rules(_chosen_rulesets(args)))
    return 0


def cmd_rules_ops(args: argparse.Namespace) -> int:
    from rewrite.rules.ops import describe_ops

    print(describe_ops())
    return 0


def cmd_rules_explain(args: argparse.Namespace) -> int:
    from rewrite.rules.explain import explain

    result = explain(
        args.rule,
        args.model,
        _chosen_rulesets(args),
        Limits(args.iter_limit, args.node_limit, args.time_limit),
    )
    print(result.text())
    return 0


def _add_rules_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    r = sub.add_parser("rules", help="list rules, or explain why a rule matches a model")
    rsub = r.add_subparsers(dest="rules_command", required=True)
    for name, helptext in (
        ("list", "print every rule with its identity, tags and source"),
        ("explain", "where RULE matches MODEL, or which step fails"),
        ("ops", "print every op a rule can use, with its inputs and attributes"),
    ):
        c = rsub.add_parser(name, help=helptext)
        if name == "ops":
            c.set_defaults(func=cmd_rules_ops)
            continue
        if name == "explain":
            c.add_argument("rule", help="the rule's name")
            c.add_argument("model", help="an ONNX model")
            c.add_argument("--iter-limit", type=int, default=Limits.iterations)
            c.add_argument("--node-limit", type=int, default=Limits.nodes)
            c.add_argument("--time-limit", type=float, default=Limits.seconds)
        c.add_argument("--rules", action="append", metavar="FILE", help="a rule file; repeatable")
        c.add_argument(
            "--ruleset", action="append", metavar="NAME", help="only these rule sets (default: all)"
        )
        c.set_defaults(func=cmd_rules_list if name == "list" else cmd_rules_explain)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rewrite", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    o = sub.add_parser("optimize", help="optimize an ONNX model")
    o.add_argument("input", help="the model to optimize (never modified)")
    o.add_argument("output", help="where to write the optimized model")
    o.add_argument("--report", metavar="JSON", help="write the report as JSON here")
    o.add_argument(
        "--rules",
        action="append",
        metavar="FILE",
        help="a rule file (Python, defines RuleSets); repeatable",
    )
    o.add_argument(
        "--disable-rule", action="append", metavar="NAME", help="do not use this rule (repeatable)"
    )
    o.add_argument(
        "--allow-approximate", action="store_true", help="also use rules tagged approximate"
    )
    o.add_argument(
        "--measure",
        action="store_true",
        help="after verification, time input and output in ONNX Runtime (interleaved rounds) "
        "and write the input graph unless the output is faster beyond noise",
    )
    o.add_argument(
        "--measure-threads",
        type=int,
        default=1,
        metavar="N",
        help="intra-op threads for --measure (default 1)",
    )
    o.add_argument(
        "--precision",
        choices=("exact", "auto"),
        default="exact",
        help="exact (default): every rewrite is exact; auto: lower ops to int8 where the "
        "measured error stays within --max-error and the result is measured faster",
    )
    o.add_argument(
        "--max-error",
        type=float,
        metavar="E",
        help="--precision auto: the error budget per output, in --metric",
    )
    o.add_argument(
        "--metric",
        choices=("maxrel", "cosine", "top1"),
        default="maxrel",
        help="--precision auto: maxrel = max|diff| / max|reference| (default), cosine = 1 - "
        "cosine similarity, top1 = fraction of rows whose argmax changed",
    )
    o.add_argument(
        "--calibration",
        action="append",
        metavar="NPZ",
        help="--precision auto: a representative feed set (.npz, the --inputs format); "
        "repeatable; every other one is held back for the final check (default: seeded "
        "random inputs, and the report says so)",
    )
    o.add_argument(
        "--ruleset",
        action="append",
        metavar="NAME",
        help="rule set to use, built-in or from --rules (repeatable; default: all)",
    )
    o.add_argument(
        "--no-rules",
        action="store_true",
        help="apply no rules (round trip through the e-graph only)",
    )
    o.add_argument("--no-fold", action="store_true", help="do not fold constant subgraphs")
    o.add_argument(
        "--extractor",
        choices=["ilp", "greedy"],
        default="ilp",
        help="ilp: greedy, then the ILP warm-started from it (default); greedy only",
    )
    o.add_argument(
        "--ilp-time-limit",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds for the ILP (within --time-limit; default %(default)s)",
    )
    o.add_argument(
        "--trust-rules",
        action="store_true",
        help="use rules without proving them (they are proved by default; cached)",
    )
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
        default=DEFAULT_TIME_LIMIT,
        metavar="SECONDS",
        help="seconds for the whole run, load to save; saturation gets what loading, saving "
        "and checking leave; 0 = none (default %(default)s)",
    )
    o.add_argument(
        "--max-memory",
        type=float,
        default=None,
        metavar="MB",
        # argparse %-formats help texts: a literal percent sign is written %%
        help="resident memory of the optimizer's worker, checked between saturation "
        f"iterations (default {MEMORY_FRACTION:.0%}% of RAM: {default_max_memory_mb():.0f} MB)",
    )
    o.add_argument(
        "--match-limit",
        type=int,
        default=Limits.match_limit,
        metavar="N",
        help="back-off scheduler: matches a rule may fire per iteration before it is banned "
        "(default %(default)s)",
    )
    o.add_argument(
        "--no-isolate",
        action="store_true",
        help="run egglog in this process (no crash isolation; for debugging)",
    )
    o.add_argument(
        "--target",
        choices=["cpu", "cuda", "portable"],
        default="cpu",
        help="cost model target (default %(default)s); portable: only standard ONNX ops are "
        "written (besides the input's own) and only portable rules run, priced as the CPU EP",
    )
    o.add_argument(
        "--dim",
        action="append",
        type=_dim,
        metavar="NAME=N",
        help="size of a symbolic input dim, for pricing and the check inputs (repeatable; "
        "e.g. --dim batch=8 --dim sequence=128; unnamed dims count as 1)",
    )
    o.add_argument(
        "--no-verify", action="store_true", help="skip the differential check (not recommended)"
    )
    o.add_argument("--seed", type=int, default=0, help="seed of the random check inputs")
    o.add_argument("--trials", type=int, default=2, help="random input sets checked")
    o.add_argument("--inputs", metavar="NPZ", help="also check on these inputs (.npz)")
    o.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    o.set_defaults(func=cmd_optimize)
    _add_rules_parser(sub)
    from rewrite.extract.calibrate_cli import add_calibrate_parser
    from rewrite.verify.command import add_verify_parser

    add_verify_parser(sub)
    add_calibrate_parser(sub)
    return p


def one_line(message: str) -> str:
    """`message` with control characters (a newline in a value name) escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except RewriteError as e:
        print(f"rewrite: error: {one_line(str(e))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("rewrite: interrupted; nothing was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
