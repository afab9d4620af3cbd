"""The validator every extractor's `Choice` passes before anything decodes it.

`check_choice` accepts a choice when: its roots are the snapshot's; every pick names a class of
the snapshot and one of that class's e-nodes; every root is picked; every child class of a
picked e-node reachable from the roots is picked; and the picked graph reachable from the roots
is acyclic. Picks for classes the roots do not need are allowed (they are ignored).
"""

from __future__ import annotations

from rewrite.errors import ExtractionError
from rewrite.extract.snapshot import Choice, ENode, Snapshot


def describe(node: ENode) -> str:
    """A short readable form of an e-node: `Add(3, 4)`, `Input('x')`, `Out[1](12)`."""
    if node.op in ("Input", "Init") and node.args:
        return f"{node.op}({node.args[0]!r})"
    if node.op == "Out":
        index = node.args[0] if node.args else 0
        return f"Out[{index}]({', '.join(map(str, node.children))})"
    domain = f"{node.domain}." if node.domain else ""
    return f"{domain}{node.op}({', '.join(map(str, node.children))})"


def class_label(snapshot: Snapshot, cid: int) -> str:
    """`class 7` or `class 7 ('logits')` when the class holds original value names."""
    cls = snapshot.classes.get(cid)
    if cls is not None and cls.names:
        return f"class {cid} ({', '.join(repr(n) for n in cls.names[:3])})"
    return f"class {cid}"


def check_choice(snapshot: Snapshot, choice: Choice) -> None:
    """Raise ExtractionError naming the first problem if `choice` is not a valid extraction."""
    who = choice.extractor or "choice"
    if list(choice.roots) != list(snapshot.roots):
        raise ExtractionError(
            f"{who}: the choice's roots {list(choice.roots)} are not the snapshot's "
            f"{list(snapshot.roots)}"
        )
    picks = choice.picks
    for cid, node in picks.items():
        cls = snapshot.classes.get(cid)
        if cls is None:
            raise ExtractionError(f"{who}: picks class {cid}, which is not in the snapshot")
        if node not in cls.nodes:
            have = ", ".join(describe(n) for n in cls.nodes[:6])
            raise ExtractionError(
                f"{who}: the pick for {class_label(snapshot, cid)}, {describe(node)}, is not "
                f"one of its e-nodes ({have})"
            )
    for root in snapshot.roots:
        if root not in picks:
            raise ExtractionError(f"{who}: root {class_label(snapshot, root)} is not picked")
    _check_acyclic(snapshot, picks, who)


def _check_acyclic(snapshot: Snapshot, picks: dict[int, ENode], who: str) -> None:
    """Iterative DFS from the roots over picks: missing child picks and cycles are errors."""
    done: set[int] = set()
    on_path: dict[int, int] = {}  # class -> its position in `path`
    for root in snapshot.roots:
        if root in done:
            continue
        path: list[int] = [root]
        on_path[root] = 0
        stack: list[int] = [0]  # next child index for each class on the path
        while path:
            cid = path[-1]
            node = picks[cid]
            i = stack[-1]
            if i == len(node.children):
                done.add(cid)
                del on_path[cid]
                path.pop()
                stack.pop()
                continue
            stack[-1] = i + 1
            kid = node.children[i]
            if kid in done:
                continue
            if kid in on_path:
                cycle = [*path[on_path[kid] :], kid]
                raise ExtractionError(
                    f"{who}: the picked graph has a cycle through "
                    f"{class_label(snapshot, kid)}: {' -> '.join(map(str, cycle))} "
                    f"({describe(picks[kid])})"
                )
            if kid not in picks:
                raise ExtractionError(
                    f"{who}: {class_label(snapshot, kid)}, a child of the pick "
                    f"{describe(node)} for {class_label(snapshot, cid)}, has no pick"
                )
            on_path[kid] = len(path)
            path.append(kid)
            stack.append(0)
