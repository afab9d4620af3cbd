"""Built-in rule sets, written exactly as a user's `--rules` file is.

`builtin()` returns them by name, in the order they run by default.
"""

from __future__ import annotations

from rewrite.rules.rule import RuleSet


def builtin() -> dict[str, RuleSet]:
    from rulesets.cleanup import CLEANUP
    from rulesets.constants import CONSTANTS
    from rulesets.merge import MERGE
    from rulesets.ort import ORT

    return {rs.name: rs for rs in (CLEANUP, CONSTANTS, ORT, MERGE)}
