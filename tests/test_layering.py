"""The import layering of DESIGN.md, read from the source with `ast`: no module imports a higher
layer, the stated exceptions hold, and no modules import each other in a cycle.

Layers, from the ground up: base (errors, paths, limits, files) -> ops -> onnx_io -> egraph
(with `extract.snapshot`, the plain type egraph fills and extract reads) -> rules, extract,
verify -> the pipeline's modules (every other top-level module) -> cli. Every import counts:
at module level, inside functions, and under `TYPE_CHECKING` (a cycle there is still a cycle
in the design). `from pkg import name` counts as importing `pkg.name` when that is a module.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rewrite"
BASE, OPS, ONNX_IO, EGRAPH, MIDDLE, PIPELINE, CLI = range(7)
LAYER_NAMES = ["base", "ops", "onnx_io", "egraph", "rules/extract/verify", "pipeline", "cli"]
LAYERS = {
    "rewrite": BASE,
    "rewrite.errors": BASE,
    "rewrite.paths": BASE,
    "rewrite.limits": BASE,
    "rewrite.files": BASE,
    "rewrite.providers": BASE,
    "rewrite.ops": OPS,
    "rewrite.onnx_io": ONNX_IO,
    "rewrite.egraph": EGRAPH,
    "rewrite.extract.snapshot": EGRAPH,
    "rewrite.rules": MIDDLE,
    "rewrite.extract": MIDDLE,
    "rewrite.verify": MIDDLE,
    "rewrite.precision": MIDDLE,
    "rulesets": MIDDLE,  # built-in rule files: written as a user writes one, over rewrite.rules
    "rewrite.cli": CLI,
}
"""Module or package -> layer; the longest matching prefix wins, other rewrite.* modules are
the pipeline's (PIPELINE)."""
FORBIDDEN = [
    ("rewrite.extract", "rewrite.egraph", "extractors see only a Snapshot (DESIGN.md)"),
    ("rewrite.verify", "rewrite.extract", "verify/ never imports extract/ (DESIGN.md)"),
]
"""(importer prefix, imported prefix, why): imports the layers allow but the design does not."""
EGGLOG_HOMES = ("rewrite.egraph", "rewrite.rules")
"""egglog (and its private API) is used only here, so an upgrade touches one place."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module `name` imports (ours, and third-party top-level names as `ext:egglog`)."""
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in known else base)
    return {m if m.split(".")[0] in ("rewrite", "rulesets") else f"ext:{m}" for m in out}


@cache
def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {n: _imports(n, p, set(mods)) for n, p in mods.items()}


def layer(module: str) -> int:
    """The layer of a module of ours (see LAYERS)."""
    keys = [k for k in LAYERS if module == k or module.startswith(k + ".")]
    best = max(keys, key=len, default="")
    if best == "rewrite" and module != "rewrite":
        return PIPELINE
    return LAYERS[best] if best else PIPELINE


def _prefixed(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_no_module_imports_a_higher_layer() -> None:
    bad = [
        f"{m} ({LAYER_NAMES[layer(m)]}) imports {i} ({LAYER_NAMES[layer(i)]})"
        for m, imps in _graph().items()
        for i in sorted(imps)
        if not i.startswith("ext:") and layer(i) > layer(m)
    ]
    assert not bad, "imports that reach up a layer:\n" + "\n".join(bad)


def test_design_exceptions_hold() -> None:
    bad = [
        f"{m} imports {i}: {why}"
        for m, imps in _graph().items()
        for i in sorted(imps)
        for src, dst, why in FORBIDDEN
        if _prefixed(m, src) and _prefixed(i, dst) and not _prefixed(i, "rewrite.extract.snapshot")
    ]
    bad += [
        f"{m} imports egglog: only {', '.join(EGGLOG_HOMES)} may"
        for m, imps in _graph().items()
        if "ext:egglog" in {i.split(".")[0] for i in imps}
        and not any(_prefixed(m, h) for h in EGGLOG_HOMES)
    ]
    assert not bad, "\n".join(bad)


def test_no_import_cycles() -> None:
    graph = _graph()
    graph = {m: {i for i in imps if i in graph} for m, imps in graph.items()}
    cycles = [c for c in _strongly_connected(graph) if len(c) > 1]
    assert not cycles, "modules that import each other: " + "; ".join(
        " <-> ".join(sorted(c)) for c in cycles
    )


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm (iterative): the strongly connected components of `graph`."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                out.append(comp)
    return out


def test_the_checker_sees_a_violation() -> None:
    """The checks can fail: a made-up upward import and a made-up cycle are found."""
    assert layer("rewrite.onnx_io.concrete") < layer("rewrite.verify.inputs")
    assert layer("rewrite.egraph.decode") == layer("rewrite.extract.snapshot")
    assert layer("rewrite.stages") == PIPELINE and layer("rewrite.cli") == CLI
    cyc = _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert {"a", "b", "c"} in cyc and {"d"} in cyc
