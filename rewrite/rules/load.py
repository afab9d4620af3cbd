"""Loading rule files and choosing the rule sets a run uses.

A rule file is a Python file that defines `RuleSet` values at module level (as `rulesets/`
does). Loading runs it; every error names the file and line: a syntax error, an unknown op,
an unbound variable, a malformed rule (`RuleError` from the rule's definition carries the
rule's file:line), a file that defines no rule set, and a rule name defined twice (in one
file, two files, or a file and a built-in rule set: a name is a rule's identity in reports,
proofs and `--disable-rule`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from rewrite.errors import RuleError
from rewrite.rules.rule import RuleSet


def load_rule_file(path: str | Path) -> list[RuleSet]:
    """The `RuleSet`s a rule file defines, in definition order."""
    path = Path(path)
    if not path.is_file():
        raise RuleError(f"{path}: no such rule file")
    try:
        source = path.read_text()
        code = compile(source, str(path), "exec")
    except SyntaxError as e:
        raise RuleError(f"{path}:{e.lineno}: syntax error: {e.msg}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise RuleError(f"{path}: cannot read the rule file: {e}") from e
    name = "rewrite_user_rules_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except RuleError as e:
        raise RuleError(f"{path}: {e}") from e
    except Exception as e:  # a user's file: any error is theirs, named by file and line
        line = _user_line(e, str(path))
        raise RuleError(f"{path}:{line}: {type(e).__name__}: {e}") from e
    finally:
        sys.modules.pop(name, None)
    found = [v for v in module.__dict__.values() if isinstance(v, RuleSet)]
    if not found:
        raise RuleError(
            f'{path}: defines no RuleSet (write `MY_RULES = RuleSet("name")` and '
            "decorate rules with `@MY_RULES.rule`)"
        )
    return found


def _user_line(e: BaseException, filename: str) -> int | str:
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == filename]
    return frames[-1].lineno if frames and frames[-1].lineno is not None else "?"


def select_rulesets(
    *,
    rule_files: Sequence[str] = (),
    names: Sequence[str] | None = None,
    disabled: Sequence[str] = (),
    allow_approximate: bool = False,
    no_rules: bool = False,
    target: str | None = None,
) -> list[RuleSet]:
    """The rule sets a run uses: the built-ins and every rule file's (only those named, when
    `names` is given), without the disabled rules and, unless allowed, approximate rules."""
    if no_rules:
        return []
    available = load_rulesets(rule_files)
    if names:
        unknown = [n for n in names if n not in available]
        if unknown:
            raise RuleError(
                f"unknown ruleset {', '.join(unknown)}; available: {', '.join(available)}"
            )
        chosen = [available[n] for n in names]
    else:
        chosen = list(available.values())
    every = {r.name for rs in chosen for r in rs}
    unknown = [d for d in disabled if d not in every]
    if unknown:
        raise RuleError(
            f"--disable-rule: no rule named {', '.join(unknown)}; rules in use: "
            f"{', '.join(sorted(every))}"
        )
    out = []
    for rs in chosen:
        keep = [
            r
            for r in rs
            if r.name not in disabled
            and (allow_approximate or r.exact)
            and (target is None or serves(r.tags, target))
        ]
        out.append(RuleSet(rs.name, keep, rs.doc))
    return out


def load_rulesets(rule_files: Sequence[str]) -> dict[str, RuleSet]:
    """The built-in rule sets and every rule file's, by name. Raises RuleError for a rule set
    name or a rule name defined twice (naming both definitions)."""
    from rulesets import builtin

    available = dict(builtin())
    origin = {name: "" for name in available}  # rule set -> its file ("" for a built-in)
    for f in rule_files:
        for rs in load_rule_file(f):
            if rs.name in available:
                raise RuleError(
                    f"{f}: ruleset '{rs.name}' is already defined (built-in or in "
                    "another file); give it another name"
                )
            available[rs.name] = rs
            origin[rs.name] = str(f)
    seen: dict[str, str] = {}
    for name, rs in available.items():
        for rule in rs:
            where = _definition(rule.source, name, origin[name])
            if rule.name in seen:
                raise RuleError(
                    f"rule '{rule.name}' is defined twice: {seen[rule.name]} and {where}; "
                    "rule names must be unique (rename one)"
                )
            seen[rule.name] = where
    return available


def _definition(source: str, ruleset: str, file: str) -> str:
    """Where a rule is defined, for messages: its file as given (or its source) and line."""
    kind = "ruleset" if file else "built-in ruleset"
    name, _, line = source.rpartition(":")
    if file and Path(file).name == name:
        source = f"{file}:{line}"
    return f"{source} ({kind} '{ruleset}')"


def serves(tags: frozenset[str], target: str) -> bool:
    """A rule serves `target` ("cpu" or "cuda") when it is portable or tagged `ort-<target>`."""
    return "portable" in tags or f"ort-{target}" in tags
