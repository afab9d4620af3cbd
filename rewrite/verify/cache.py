"""The proof cache: verification results keyed by what they depend on.

The key of a rule's result is a SHA-256 of
- the rule's structure: its name, tags, parameters, and every rewrite's sides and guards
  (a canonical form of the terms and expressions, so two files defining the same rule share
  an entry and any change to a rule is a new entry);
- the semantics it was checked against: the source text of every op module the rule uses,
  of `rewrite/ops/_z3.py`, and of the verifier (`rewrite/verify/` bound, cases, evaluate,
  prove, sample, semantics, and the sampler's specials, refute, ort_sides, sample_cases),
  so editing an op's semantics, the prover or the sampler invalidates the results that
  depend on it;
- the bound, and `VERSION` (bumped when a result's format changes).

Entries are JSON files under `cache_dir()`: `$REWRITE_CACHE_DIR`, else
`$XDG_CACHE_HOME/rewrite/proofs`, else `~/.cache/rewrite/proofs`. The cache is best-effort:
an unreadable entry is a miss and an unwritable folder is skipped; writes are atomic.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from rewrite.files import atomic_text
from rewrite.ops.registry import lookup
from rewrite.paths import user_cache_dir
from rewrite.rules.language import And, App, AttrVar, BinOp, Call, Cmp, Lit, Term, Var, subterms
from rewrite.rules.rule import Rule

VERSION = 5
"""5: every rewrite sampled, term-relative rules; 4: ranks 0-6 and dims around constants in
the bound; 2: adversarial sampling."""
# 3: exactness classes (bit-exact / exact with the float check), bit-vector integers, IEEE model
_VERIFIER = (
    "bound.py", "cases.py", "evaluate.py", "prove.py", "sample.py", "semantics.py",
    "specials.py", "refute.py", "ort_sides.py", "sample_cases.py", "confirm.py", "floatcheck.py",
    "solve.py", "witness.py",
)  # fmt: skip


def cache_dir() -> Path:
    env = os.environ.get("REWRITE_CACHE_DIR")
    if env:
        return Path(env)
    return user_cache_dir() / "proofs"


def canonical(x: Any) -> Any:
    """A hashable, printable canonical form of a term, expression or literal."""
    if isinstance(x, Var):
        return ("var", x.name)
    if isinstance(x, App):
        attrs = tuple((n, canonical(v)) for n, v in x.attrs)
        return ("app", x.domain, x.op, attrs, tuple(canonical(i) for i in x.inputs))
    if isinstance(x, Lit):
        return ("lit", x.kind, x.value)
    if isinstance(x, AttrVar):
        return ("attr", x.kind, x.name)
    if isinstance(x, BinOp | Cmp):
        return (type(x).__name__, x.op, canonical(x.left), canonical(x.right))
    if isinstance(x, And):
        return ("and", tuple(canonical(p) for p in x.parts))
    if isinstance(x, Call):
        return ("call", x.fn, tuple(canonical(a) for a in x.args))
    if isinstance(x, list | tuple):
        return tuple(canonical(v) for v in x)
    return x


def rule_form(rule: Rule) -> Any:
    sides = tuple(
        (
            tuple(canonical(t) for t in rw.lhs),
            tuple(canonical(t) for t in rw.rhs),
            tuple(canonical(g) for g in rw.guards),
        )
        for rw in rule.rewrites
    )
    return (rule.name, tuple(sorted(rule.tags)), rule.params, sides)


def _ops_of(rule: Rule) -> set[tuple[str, str]]:
    out = set()
    for rw in rule.rewrites:
        for t in (*rw.lhs, *rw.rhs):
            out |= {(s.domain, s.op) for s in subterms(t) if isinstance(s, App)}
        for g in rw.guards:
            out |= _ops_in_expr(g)
    return out


def _ops_in_expr(e: Any) -> set[tuple[str, str]]:
    if isinstance(e, Term):
        return {(s.domain, s.op) for s in subterms(e) if isinstance(s, App)}
    if isinstance(e, BinOp | Cmp):
        return _ops_in_expr(e.left) | _ops_in_expr(e.right)
    if isinstance(e, And):
        return set().union(*(_ops_in_expr(p) for p in e.parts))
    if isinstance(e, Call):
        return set().union(*(_ops_in_expr(a) for a in e.args))
    return set()


@cache
def _file_hash(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "?"


@cache
def _op_source(domain: str, op: str) -> str:
    spec = lookup(op, domain)
    if spec is None:
        return "?"
    return _file_hash(inspect.getsourcefile(spec.infer) or "?")


def semantics_version(rule: Rule) -> str:
    """A hash of the op modules the rule uses, the Z3 helpers and the verifier."""
    here = Path(__file__).parent
    ops = Path(inspect.getsourcefile(lookup) or ".").parent
    parts = [_file_hash(str(here / f)) for f in _VERIFIER]
    parts.append(_file_hash(str(ops / "_z3.py")))
    parts.append(_file_hash(str(ops / "_cast.py")))
    parts += [f"{d}:{o}:{_op_source(d, o)}" for d, o in sorted(_ops_of(rule))]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def key(rule: Rule, bound: Any) -> str:
    """The cache key of `rule`'s results under `bound`."""
    text = repr((VERSION, rule_form(rule), semantics_version(rule), repr(bound)))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def load(k: str) -> dict[str, Any] | None:
    try:
        data = json.loads((cache_dir() / f"{k}.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def store(k: str, data: dict[str, Any]) -> None:
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_text(folder / f"{k}.json") as f:
            json.dump(data, f)
    except OSError:
        return
