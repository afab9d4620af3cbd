"""Rules: the rule form (`RuleSet`, `Rule`), loading rule files, and the saturation driver."""

from rewrite.rules.rule import Rule, RuleSet

__all__ = ["Rule", "RuleSet"]
