"""Which rules the written graph owes its changes to, and what each one is estimated to save.

`attribute` compares the input graph (the snapshot taken before saturation, with its greedy
choice) with the chosen graph (the snapshot after saturation, with the extraction's choice):

- An input e-node is carried into the after-snapshot by its key (op, domain, arguments, child
  classes mapped bottom-up; by value name where the key is gone). A chosen e-node whose key is
  no input e-node's was *created* by saturation; an input e-node whose key is not chosen was
  *removed*. Leaves (`Input`, `Init`, `Absent`), `Out` projections and e-nodes that compute a
  constant (folded, cost 0: `extract.constants`) are not counted.
- egglog 14 records no provenance: rows carry no rule or timestamp (`freeze()` gives inputs,
  output and `subsumed`), and its proof mode is not available from Python. So an e-node is
  credited by shape. A created e-node goes to the rules that matched at least once and whose
  right side builds an op of its type whose constructor children (one level) are in its child
  classes (by op alone if none qualify). A removed e-node goes to the matched rules whose left
  side holds such a pattern for it; narrowed to the creators of the e-node its class now uses,
  else to the rules credited with its removed consumers, when that leaves any.
- An e-node credited to k rules counts once for each (`shared` says how many were) and moves
  1/k of its cost. A rule's `cost_delta_us` is the estimated µs of the chosen e-nodes credited
  to it minus those of the removed input e-nodes credited to it (negative: it saves). What no
  rule is credited with, and the cost changes of e-nodes kept from the input (a class priced
  differently after saturation), is `unattributed`: the deltas and it sum to cost after minus
  cost before.

So `created`/`removed` say which rules made it into the written graph, but where two matched
rules build the same pattern the split between them is a guess, and a rule whose only effect is
a union (`identity_elim`) shows as removals, never creations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rewrite.extract.constants import computes_constant, constant_classes
from rewrite.extract.snapshot import LEAVES, Choice, ENode, Snapshot
from rewrite.rules.language import App, subterms
from rewrite.rules.rule import RuleSet

Costs = Mapping[tuple[int, ENode], float]
Head = tuple[str, str]
"""(op, domain) with ai.onnx as ""."""
_SKIP = LEAVES | {"Out"}


@dataclass(frozen=True)
class Pattern:
    """One constructor of a rule side: its head and its children's heads (None: a variable)."""

    head: Head
    kids: tuple[Head | None, ...]


@dataclass(frozen=True)
class RuleShape:
    """The constructors a rule matches (`left`) and builds (`right`)."""

    name: str
    left: tuple[Pattern, ...]
    right: tuple[Pattern, ...]


@dataclass
class RuleEffect:
    """What one rule did to the written graph (module docstring: how it is attributed)."""

    matches: int = 0
    """Matches fired in saturation."""
    created: int = 0
    """E-nodes of the written graph the rule built."""
    removed: int = 0
    """E-nodes of the input graph the rule replaced (not in the written graph)."""
    shared: int = 0
    """Of those, e-nodes credited to other rules too."""
    cost_delta_us: float = 0.0
    """Estimated µs of its created e-nodes minus its removed ones (negative: saved)."""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["cost_delta_us"] = round(self.cost_delta_us, 3)
        return out


def _head(op: str, domain: str) -> Head:
    return (op, "" if domain == "ai.onnx" else domain)


def _patterns(terms: Iterable[Any]) -> tuple[Pattern, ...]:
    """Every op application in `terms` (sub-terms included) as a `Pattern`, once each."""
    out: list[Pattern] = []
    for term in terms:
        for t in subterms(term):
            if isinstance(t, App):
                kids = tuple(
                    _head(k.op, k.domain) if isinstance(k, App) else None for k in t.inputs
                )
                out.append(Pattern(_head(t.op, t.domain), kids))
    return tuple(dict.fromkeys(out))


def rule_shapes(rulesets: Sequence[RuleSet]) -> list[RuleShape]:
    """The `RuleShape` of every rule of `rulesets` (all its rewrite forms together)."""
    return [
        RuleShape(
            rule.name,
            _patterns(t for rw in rule.rewrites for t in rw.lhs),
            _patterns(t for rw in rule.rewrites for t in rw.rhs),
        )
        for rs in rulesets
        for rule in rs
    ]


def _fits(p: Pattern, node: ENode, snap: Snapshot, strict: bool) -> bool:
    """`node` has `p`'s head and (`strict`) a child class holding each constructor child."""
    if _head(node.op, node.domain) != p.head:
        return False
    if not strict:
        return True
    if len(node.children) != len(p.kids):
        return False
    return all(
        k is None or any(_head(n.op, n.domain) == k for n in _nodes(snap, c))
        for k, c in zip(p.kids, node.children, strict=True)
    )


def _nodes(snap: Snapshot, cid: int) -> list[ENode]:
    cls = snap.classes.get(cid)
    return [] if cls is None else cls.nodes


def _candidates(
    sides: Mapping[str, tuple[Pattern, ...]], node: ENode, snap: Snapshot
) -> frozenset[str]:
    """Rules with a pattern `node` fits (children included; by head alone if none fits)."""
    for strict in (True, False):
        found = frozenset(
            r for r, pats in sides.items() if any(_fits(p, node, snap, strict) for p in pats)
        )
        if found:
            return found
    return frozenset()


Key = tuple[str, str, tuple[Any, ...], bool, tuple[int, ...]]


def _key(node: ENode, kids: tuple[int, ...]) -> Key:
    return (node.op, node.domain, node.args, node.opaque, kids)


def _post_order(choice: Choice, roots: list[int]) -> list[int]:
    """Classes `choice` needs from `roots`, children before parents."""
    order: list[int] = []
    seen: set[int] = set()
    stack: list[tuple[int, bool]] = [(r, False) for r in reversed(roots)]
    while stack:
        cid, done = stack.pop()
        if done:
            order.append(cid)
            continue
        if cid in seen:
            continue
        seen.add(cid)
        stack.append((cid, True))
        stack.extend((k, False) for k in reversed(choice.picks[cid].children) if k not in seen)
    return order


def _carry(
    before: Snapshot, order: list[int], picks: Mapping[int, ENode], after: Snapshot
) -> dict[int, int]:
    """before class -> after class, for the input graph's classes (children first)."""
    index = {_key(n, n.children): cid for cid, n in after.enodes()}
    by_name = {name: cls.id for cls in after for name in cls.names}
    out: dict[int, int] = {}
    for cid in order:
        node = picks[cid]
        kids = tuple(out.get(k, -1) for k in node.children)
        found = index.get(_key(node, kids))
        if found is None:
            found = next((by_name[n] for n in before.classes[cid].names if n in by_name), None)
        if found is not None:
            out[cid] = found
    return out


@dataclass
class _Side:
    """One graph: a snapshot, the choice that is the graph, the e-nodes' costs."""

    snap: Snapshot
    choice: Choice
    costs: Costs

    def __post_init__(self) -> None:
        self.order = _post_order(self.choice, self.snap.roots)
        self.consts = constant_classes(self.snap)

    def node(self, cid: int) -> ENode:
        return self.choice.picks[cid]

    def counted(self, cid: int) -> bool:
        """A real, non-constant node of the graph (module docstring)."""
        node = self.node(cid)
        return node.op not in _SKIP and not computes_constant(node, self.consts)

    def cost(self, cid: int) -> float:
        return self.costs.get((cid, self.node(cid)), 0.0)

    def total(self) -> float:
        return sum(self.cost(cid) for cid in self.order)


def _diff(b: _Side, a: _Side, carried: Mapping[int, int]) -> tuple[list[int], list[int]]:
    """(input classes whose e-node is not in the chosen graph, chosen classes whose e-node is
    not in the input graph), each e-node matched once, by key."""
    in_key: dict[int, Key | None] = {}
    for cid in b.order:
        node = b.node(cid)
        kids = tuple(carried.get(k, -1) for k in node.children)
        in_key[cid] = _key(node, kids) if cid in carried and -1 not in kids else None
    out_key = {cid: _key(a.node(cid), a.node(cid).children) for cid in a.order}
    left = Counter(out_key.values())
    removed = []
    for cid in b.order:
        k = in_key[cid]
        if k is not None and left[k] > 0:
            left[k] -= 1
        else:
            removed.append(cid)
    avail = Counter(k for k in in_key.values() if k is not None)
    created = []
    for cid in a.order:
        if avail[out_key[cid]] > 0:
            avail[out_key[cid]] -= 1
        else:
            created.append(cid)
    return removed, created


def attribute(
    before: tuple[Snapshot, Choice, Costs],
    after: tuple[Snapshot, Choice, Costs],
    rulesets: Sequence[RuleSet],
    matches: Mapping[str, int],
) -> dict[str, Any]:
    """Per rule that matched, its `RuleEffect` on the written graph, and what no rule is
    credited with (module docstring). `before`: the input's snapshot, greedy choice and
    costs; `after`: the saturated snapshot, the extraction's choice and costs; `matches`:
    matches per rule name (`SaturationStats.matches`)."""
    b, a = _Side(*before), _Side(*after)
    carried = _carry(b.snap, b.order, b.choice.picks, a.snap)
    removed, created = _diff(b, a, carried)
    fired = [s for s in rule_shapes(rulesets) if matches.get(s.name, 0) > 0]
    effects = {s.name: RuleEffect(matches=matches[s.name]) for s in fired}
    other = RuleEffect()
    by_creator: dict[int, frozenset[str]] = {}
    for cid in created:
        if a.counted(cid):
            who = _candidates({s.name: s.right for s in fired}, a.node(cid), a.snap)
            by_creator[cid] = who
            _book(effects, other, who, a.cost(cid), created=True)
    parents: dict[int, list[int]] = {}
    for cid in b.order:
        for k in b.node(cid).children:
            parents.setdefault(k, []).append(cid)
    gone = set(removed)
    credited: dict[int, frozenset[str]] = {}
    for cid in reversed(b.order):  # consumers before what they read
        if cid not in gone or not b.counted(cid):
            continue
        who = _candidates({s.name: s.left for s in fired}, b.node(cid), b.snap)
        hint = by_creator.get(carried.get(cid, -1))
        if hint is None:
            hint = frozenset().union(*(credited.get(p, frozenset()) for p in parents.get(cid, [])))
        credited[cid] = who & hint or who
        _book(effects, other, credited[cid], -b.cost(cid), created=False)
    moved = sum(e.cost_delta_us for e in effects.values())
    other.cost_delta_us = a.total() - b.total() - moved
    unattributed = other.to_json()
    del unattributed["matches"], unattributed["shared"]
    return {
        "per_rule": {n: effects[n].to_json() for n in sorted(effects)},
        "unattributed": unattributed,
    }


def _book(
    effects: dict[str, RuleEffect],
    other: RuleEffect,
    who: frozenset[str],
    cost: float,
    *,
    created: bool,
) -> None:
    """Credit one e-node (cost `cost`, signed) to the rules `who`, or to `other`."""
    for target in [effects[r] for r in sorted(who)] or [other]:
        if created:
            target.created += 1
        else:
            target.removed += 1
        target.shared += len(who) > 1
        if who:
            target.cost_delta_us += cost / len(who)


def rule_effects(
    before: tuple[Snapshot, Choice, Costs],
    after: tuple[Snapshot, Choice, Costs],
    rulesets: Sequence[RuleSet],
    matches: Mapping[str, int],
) -> dict[str, Any]:
    """`attribute`, for the report: a failure of ours here is recorded, never raised (the
    report is worth less than the optimized model)."""
    try:
        return attribute(before, after, rulesets, matches)
    except Exception as e:  # a bug in the attribution must not cost the user the model
        return {"error": f"{type(e).__name__}: {e}"}
