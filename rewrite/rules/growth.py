"""How many e-nodes one match of a rule can add: the bound the saturation driver uses to size
each iteration's match limit (`saturate._Driver`).

`growth_per_label` counts the constructor calls on a compiled egglog rule's right side (a
`rule`'s actions, a `rewrite`'s right side, both sides of a `birewrite`): one match adds at
most that many e-nodes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rewrite.rules.rule import RuleSet

_HEAD = re.compile(r"\((?=[A-Z])")
_NAME = re.compile(r':name\s+"([^"]+)"')


def growth_per_label(rulesets: Sequence[RuleSet], ruleset_name: str) -> dict[str, int]:
    """egglog rule label -> most e-nodes one match can add (constructor calls on its right)."""
    out: dict[str, int] = {}
    for rs in rulesets:
        for rule in rs:
            for form in rule.compile(ruleset_name):
                m = _NAME.search(form)
                label = m.group(1) if m else rule.name
                out[label] = max(1, len(_HEAD.findall(_right_side(form))))
    return out


def _right_side(form: str) -> str:
    """The part of an egglog rule form that builds terms: a `rule`'s actions, or a
    `rewrite`'s right side (both sides of a `birewrite`). The whole form if unsure."""
    parts = _top_level(form)
    if len(parts) >= 3 and parts[0] in ("rule", "rewrite"):
        return parts[2]
    if len(parts) >= 3 and parts[0] == "birewrite":
        return parts[1] + parts[2]
    return form


def _top_level(form: str) -> list[str]:
    """The top-level elements of one s-expression `(a (b c) d)` -> ['a', '(b c)', 'd']."""
    body = form.strip()
    if not body.startswith("("):
        return []
    out: list[str] = []
    depth, start, in_str = 0, -1, False
    for i, ch in enumerate(body):
        if in_str:
            in_str = ch != '"' or body[i - 1] == "\\"
            continue
        if ch == '"':
            in_str = True
            if depth == 1 and start < 0:
                start = i
        elif ch == "(":
            depth += 1
            if depth == 2:
                start = i
        elif ch == ")":
            depth -= 1
            if depth == 1 and start >= 0:
                out.append(body[start : i + 1])
                start = -1
            elif depth == 0:
                if start >= 0:
                    out.append(body[start:i])
                break
        elif ch.isspace() and depth == 1:
            if start >= 0 and body[start] != "(":
                out.append(body[start:i])
                start = -1
        elif depth == 1 and start < 0:
            start = i
    return out
