"""Rules: the rule language, rule sets, loading rule files, and the saturation driver.

A rule file imports only this:

    from rewrite.rules import Int, Ints, Rewrite, RuleSet, Tensor, op, rewrite
"""

from rewrite.rules.language import Float, Int, Ints, Rewrite, Tensor, rewrite
from rewrite.rules.ops import op
from rewrite.rules.rule import Rule, RuleSet

__all__ = ["Float", "Int", "Ints", "Rewrite", "Rule", "RuleSet", "Tensor", "op", "rewrite"]
