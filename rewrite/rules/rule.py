"""Rules and rule sets.

A rule is a function decorated with `@RULESET.rule`. Its parameters are the pattern
variables, typed `Tensor` (a tensor), `Ints` (an int-list attribute), `Int` or `Float`; its
name is the rule's name in every report; its docstring states the identity and its condition;
it returns `rewrite(lhs).to(rhs, *conditions)` (or a list of them, e.g. both operand orders):

    @ALGEBRA.rule
    def matmul_factor_left(a: Tensor, b: Tensor, c: Tensor) -> Rewrite:
        \"\"\"MatMul(A, B) + MatMul(A, C) = MatMul(A, B + C)   when shape(B) == shape(C).\"\"\"
        return rewrite(a @ b + a @ c).to(a @ (b + c), b.shape == c.shape)

A `RuleSet` is a value, not a global registry; built-in rule sets in `rulesets/` are written
exactly as a user's `--rules` file is.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewrite.errors import RuleError
from rewrite.rules.domain import Domain
from rewrite.rules.elements import Cond
from rewrite.rules.language import (
    And,
    AttrVar,
    Call,
    Float,
    Int,
    Ints,
    Rewrite,
    Var,
    nodes,
)
from rewrite.rules.literals import desugar

TAGS = frozenset(
    {"bit-exact", "exact", "approximate", "term-relative", "portable", "ort-cpu", "ort-cuda"}
)
CLASSES = ("bit-exact", "exact", "approximate")
"""Exactness classes, one per rule: `bit-exact` (the sides are bit-identical in IEEE float32
and float16, proved in Z3's floating-point theory); `exact` (the default: equal in real
arithmetic, and in IEEE float32/float16 within the differential check's tolerance of the
output); `approximate` (opt-in: sampled within a declared tolerance, relative to the output,
or with `term-relative` relative to the magnitude of the terms it sums: `verify.terms`)."""
_PARAM_KINDS: dict[str, Callable[[str], Any]] = {
    "Tensor": Var,
    "Var": Var,
    "Ints": Ints,
    "Int": Int,
    "Float": Float,
}


@dataclass(frozen=True)
class Rule:
    name: str
    doc: str
    rewrites: tuple[Rewrite, ...]
    tags: frozenset[str] = frozenset({"exact", "portable"})
    source: str = ""
    """file:line of the rule's definition."""
    params: tuple[tuple[str, str], ...] = ()
    """(name, kind) of the pattern variables, kind in Tensor/Ints/Int/Float."""
    domain: Domain | None = None
    """Where the rule was proved (set by the verification gate); the compiled rule matches
    only there. None: unverified, matches wherever its pattern does."""

    @property
    def identity(self) -> str:
        return self.doc.strip().splitlines()[0] if self.doc.strip() else self.name

    @property
    def exact(self) -> bool:
        """`bit-exact` or `exact` (not `approximate`)."""
        return "approximate" not in self.tags

    @property
    def exactness(self) -> str:
        """The rule's class: `bit-exact`, `exact` or `approximate` (see `CLASSES`)."""
        return next(c for c in CLASSES if c in self.tags)

    def compile(self, ruleset: str) -> list[str]:
        """The egglog commands of this rule in `ruleset`, named `name` (or `name@k`)."""
        from rewrite.rules.compile import compile_rewrite

        forms = [f for rw in self.rewrites for f in compile_rewrite(rw, self.where, self.domain)]
        out = []
        for k, form in enumerate(forms):
            label = self.name if len(forms) == 1 else f"{self.name}@{k}"
            out.append(f'{form[:-1]} :ruleset {ruleset} :name "{label}")')
        return out

    @property
    def where(self) -> str:
        return f"{self.name} ({self.source})"

    def element_conditions(self) -> list[Cond]:
        """The per-element conditions (`w.all(...)`) its guards state."""
        out: list[Cond] = []
        for rw in self.rewrites:
            stack = list(rw.guards)
            while stack:
                g = stack.pop()
                if isinstance(g, And):
                    stack += g.parts
                elif isinstance(g, Call) and g.fn == "all_elems":
                    out.append(g.args[1])
        return out


@dataclass
class RuleSet:
    name: str
    rules: list[Rule] = field(default_factory=list)
    doc: str = ""

    def rule(self, fn: Callable[..., Any] | None = None, *, tags: Iterable[str] = ()) -> Any:
        """Decorator: build a `Rule` from `fn` and add it (`@RS.rule` or `@RS.rule(tags=...)`)."""

        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            self.add(make_rule(f, tags))
            return f

        return register(fn) if fn is not None else register

    def add(self, rule: Rule) -> None:
        """Append `rule`; RuleError (naming both definitions) if its name is taken here."""
        for r in self.rules:
            if r.name == rule.name:
                raise RuleError(
                    f"{rule.where}: a rule of that name is already in ruleset '{self.name}' "
                    f"({r.source})"
                )
        self.rules.append(rule)

    def without(self, names: Sequence[str]) -> RuleSet:
        return RuleSet(self.name, [r for r in self.rules if r.name not in names], self.doc)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)


def source_of(f: Callable[..., Any]) -> str:
    try:
        file = inspect.getsourcefile(f) or "?"
        return f"{Path(file).name}:{inspect.getsourcelines(f)[1]}"
    except (OSError, TypeError):
        return "?"


def make_rule(f: Callable[..., Any], tags: Iterable[str] = ()) -> Rule:
    """Call the rule function on fresh pattern variables and check what it returns."""
    src = source_of(f)
    where = f"{f.__name__} ({src})"
    tagset = frozenset(tags)
    bad = tagset - TAGS
    if bad:
        raise RuleError(f"{where}: unknown tags {sorted(bad)}; known: {sorted(TAGS)}")
    if not tagset & set(CLASSES):
        tagset |= {"exact"}
    if not tagset & {"portable", "ort-cpu", "ort-cuda"}:
        tagset |= {"portable"}
    if "term-relative" in tagset and "approximate" not in tagset:
        raise RuleError(f"{where}: `term-relative` qualifies an `approximate` rule's error")
    if len(tagset & set(CLASSES)) > 1:
        raise RuleError(
            f"{where}: a rule has one class of {', '.join(CLASSES)}, not "
            f"{' and '.join(sorted(tagset & set(CLASSES)))}"
        )
    params: list[tuple[str, str]] = []
    args = []
    for p in inspect.signature(f).parameters.values():
        ann = p.annotation
        kind = ann if isinstance(ann, str) else getattr(ann, "__name__", "")
        kind = kind.rsplit(".", 1)[-1]
        if kind not in _PARAM_KINDS:
            raise RuleError(f"{where}: parameter {p.name} needs a type: Tensor, Ints, Int or Float")
        params.append((p.name, kind))
        args.append(_PARAM_KINDS[kind](p.name))
    try:
        body = f(*args)
    except RuleError as e:
        raise RuleError(f"{where}: {e}") from e
    except TypeError as e:
        raise RuleError(f"{where}: {e}") from e
    rewrites = (body,) if isinstance(body, Rewrite) else tuple(body or ())
    if not rewrites or not all(isinstance(r, Rewrite) for r in rewrites):
        raise RuleError(f"{where}: a rule returns rewrite(lhs).to(rhs, ...) or a list of them")
    try:
        rewrites = tuple(desugar(rw) for rw in rewrites)
    except RuleError as e:
        raise RuleError(f"{where}: {e}") from e
    for rw in rewrites:
        if not rw.rhs:
            raise RuleError(f"{where}: rewrite(...) has no .to(...)")
    unused = [n for n, _ in params if n not in _names_in(rewrites)]
    if unused:
        raise RuleError(
            f"{where}: parameter {', '.join(unused)} is used nowhere in the rule (a pattern "
            "variable matches anything): use it in the left side, or remove it"
        )
    rule = Rule(f.__name__, inspect.getdoc(f) or "", rewrites, tagset, src, tuple(params))
    rule.compile("check")  # unbound variables, unknown attributes: fail at definition
    return rule


def _names_in(items: Any) -> set[str]:
    """The names of the pattern variables (tensor and attribute) anywhere in `items`: terms,
    attribute values, conditions, nested in tuples and expressions."""
    return {x.name for x in nodes(items) if isinstance(x, Var | AttrVar)}
