"""Rules and rule sets: a named identity plus the egglog commands that apply it.

A rule is a function decorated with `@RULESET.rule`: its name is the rule's name in every
report, its docstring is the identity and its condition, and it returns the egglog
`(rewrite ...)` / `(rule ...)` forms that apply it (without `:ruleset`/`:name`, which the
compiler adds). A `RuleSet` is a value, not a global registry: built-in rule sets in
`rulesets/` are written exactly as a user's `--rules` file is.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rewrite.errors import RuleError

TAGS = frozenset({"exact", "approximate", "portable", "ort-cpu", "ort-cuda"})


@dataclass(frozen=True)
class Rule:
    name: str
    doc: str
    forms: tuple[str, ...]
    """egglog `rewrite`/`rule`/`birewrite` forms, each missing its closing `:ruleset`/`:name`."""
    tags: frozenset[str] = frozenset({"exact", "portable"})
    source: str = ""
    """file:line of the rule's definition."""

    @property
    def identity(self) -> str:
        return self.doc.strip().splitlines()[0] if self.doc.strip() else self.name

    def compile(self, ruleset: str) -> list[str]:
        """The egglog commands of this rule in `ruleset`, named `name` (or `name@k`)."""
        out = []
        for k, form in enumerate(self.forms):
            body = form.strip()
            if not body.startswith("(") or not body.endswith(")"):
                raise RuleError(f"{self.name} ({self.source}): form {k} is not an s-expression")
            label = self.name if len(self.forms) == 1 else f"{self.name}@{k}"
            out.append(f'{body[:-1]} :ruleset {ruleset} :name "{label}")')
        return out


@dataclass
class RuleSet:
    name: str
    rules: list[Rule] = field(default_factory=list)
    doc: str = ""

    def rule(
        self, fn: Callable[[], str | Iterable[str]] | None = None, *, tags: Iterable[str] = ()
    ) -> Callable[..., Callable[[], str | Iterable[str]]] | Callable[[], str | Iterable[str]]:
        """Decorator: register `fn` (returns the egglog form or forms) as a rule."""

        def register(f: Callable[[], str | Iterable[str]]) -> Callable[[], str | Iterable[str]]:
            forms = f()
            forms = (forms,) if isinstance(forms, str) else tuple(forms)
            bad = set(tags) - TAGS
            if bad:
                raise RuleError(f"{f.__name__}: unknown tags {sorted(bad)}; known: {sorted(TAGS)}")
            tagset = frozenset(tags) or frozenset({"exact", "portable"})
            try:
                src = f"{Path(inspect.getsourcefile(f) or '?').name}:{inspect.getsourcelines(f)[1]}"
            except (OSError, TypeError):
                src = "?"
            if any(r.name == f.__name__ for r in self.rules):
                raise RuleError(
                    f"{f.__name__} ({src}): a rule of that name is already in ruleset '{self.name}'"
                )
            self.rules.append(Rule(f.__name__, inspect.getdoc(f) or "", forms, tagset, src))
            return f

        return register(fn) if fn is not None else register

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)
