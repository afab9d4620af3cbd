"""Saving a job's output to the staging file, and saying whose fault a rejected model is.

Every message names the user's files: the input path, or the output path they asked for,
never the staging file the model is written to first.

Checker policy. A model that ONNX Runtime runs can still fail `onnx.checker`'s full check
(a declared output shape that contradicts shape inference, duplicate metadata keys, ...).
Such an input is not refused: it is optimized, and the output is held to the strictest
check the input passes (`onnx_io.check.CHECKS`: full, basic, or none of onnx.checker's),
plus the differential check in ONNX Runtime. So:

- the optimized model fails a check the input passes: our output is invalid, a warning
  ("optimized model rejected") says so and names both files, and the input graph is written
  instead (exit 3);
- it fails a check the input fails too: the input is at fault. If ONNX Runtime cannot load
  the input either, it is refused (`InvalidInputError`, exit 1, naming the input and both
  reasons); otherwise a warning naming the input file says which check it fails and why, and
  the output is written, checked at the input's level (exit 0 when it is verified);
- the input graph (the fallback) is held to the same level; if it fails a check the input file
  passes, writing it back is our bug: ModelError naming both files (exit 1).

The input's level is only measured when a written model fails a check, so a valid input costs
nothing extra.

The checks know the ops ONNX Runtime registers in the ONNX domain (`onnx_io.check`); a written
model that uses one gets a note saying so: only ONNX Runtime runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rewrite.errors import ModelError
from rewrite.onnx_io import save
from rewrite.onnx_io.check import CHECKS, CheckerError, check_level
from rewrite.onnx_io.graph import Graph
from rewrite.onnx_io.ort_ops import attribute_ops, ort_only_used
from rewrite.report import Report


class InvalidInputError(ModelError):
    """The input fails onnx.checker's full check and ONNX Runtime cannot load it."""


_LEVEL_TEXT = {
    "full": "onnx.checker's full check",
    "basic": "onnx.checker's basic check",
    "none": "no onnx.checker check",
}


@dataclass
class Saver:
    """Saves graphs to `staged` for the user's `src` -> `dst` run, under the checker policy
    (module docstring); warnings go to `report`."""

    src: Path
    dst: Path
    staged: Path
    report: Report
    _input: tuple[str, str] | None = None
    _warned: bool = False
    _ort_note: str = ""

    def input_level(self) -> tuple[str, str]:
        """The strictest check the input file passes, and why it fails the full check.
        Raises InvalidInputError when it fails the full check and ONNX Runtime cannot load it."""
        if self._input is None:
            level, reason = check_level(self.src)
            if level != "full":
                why = _ort_refusal(self.src)
                if why:
                    raise InvalidInputError(
                        f"{self.src}: invalid model: it fails onnx.checker's full check "
                        f"({reason}) and ONNX Runtime cannot load it ({why})"
                    )
            self._input = (level, reason)
        return self._input

    def level(self) -> str:
        """The check a written model must pass: full, or the input's level once measured."""
        return "full" if self._input is None else self._input[0]

    def save_optimized(self, graph: Graph) -> bool:
        """Save the optimized graph; False (and a warning) if it is rejected."""
        try:
            self._save(graph, our_fault="the optimized model")
        except InvalidInputError:
            raise
        except Exception as e:  # ModelError, or protobuf refusing to serialize
            why = e if isinstance(e, ModelError) else f"{type(e).__name__}: {_first_line(e)}"
            self.report.warnings.append(
                f"optimized model rejected, input graph written instead: {why}"
            )
            return False
        return True

    def save_input(self, graph: Graph) -> None:
        """Save the input graph; any failure is a ModelError naming the files (exit 1)."""
        try:
            self._save(graph, our_fault=f"our copy of the input graph of {self.src}")
        except ModelError:
            raise
        except Exception as e:
            raise ModelError(
                f"{self.src}: the input graph cannot be written back to {self.dst} "
                f"({type(e).__name__}: {_first_line(e)})"
            ) from e

    def _save(self, graph: Graph, *, our_fault: str) -> None:
        """`_save_checked`, then the note on ORT's ONNX-domain ops for what was written."""
        self._save_checked(graph, our_fault=our_fault)
        self._note_ort_ops(graph)

    def _save_checked(self, graph: Graph, *, our_fault: str) -> None:
        """Save at `level()`; when the checker rejects the model at a level the input fails
        too, warn (once) that the input is invalid and retry at the input's level."""
        try:
            save(graph, self.staged, source=self.src, name=self.dst, check=self.level())
            return
        except CheckerError as e:
            level, _ = self.input_level()
            if CHECKS.index(level) <= CHECKS.index(e.level):  # the input passes it: ours
                raise ModelError(
                    f"{self.dst}: onnx.checker ({e.level} check) rejects {our_fault}, though "
                    f"the input {self.src} passes it (a bug of rewrite's): {e.reason}"
                ) from e
        self._warn_input()
        try:
            save(graph, self.staged, source=self.src, name=self.dst, check=self.level())
        except CheckerError as e:
            raise ModelError(
                f"{self.dst}: onnx.checker ({e.level} check) rejects {our_fault}, though the "
                f"input {self.src} passes it (a bug of rewrite's): {e.reason}"
            ) from e

    def _note_ort_ops(self, graph: Graph) -> None:
        """The report notes the ORT-only ONNX-domain ops of the graph just written (replacing
        the note of a graph written before it), if it has any."""
        if self._ort_note and self._ort_note in self.report.notes:
            self.report.notes.remove(self._ort_note)
        pairs = [(n.domain, n.op_type) for n in graph.nodes]
        pairs += [p for n in graph.nodes for p in attribute_ops(n.attributes)]
        ops = ort_only_used(pairs)
        self._ort_note = ""
        if ops:
            self._ort_note = (
                f"{self.dst} uses ONNX Runtime's ops in the ONNX domain ({', '.join(ops)}): "
                "only ONNX Runtime runs it, it is not portable (onnx.checker accepts it with "
                "ORT's schemas of those ops)"
            )
            self.report.notes.append(self._ort_note)

    def _warn_input(self) -> None:
        if self._warned:
            return
        self._warned = True
        level, reason = self.input_level()
        self.report.warnings.append(
            f"input model invalid: {self.src} fails onnx.checker's full check ({reason}); "
            f"not refused, since ONNX Runtime loads it: {self.dst} is held to the checks the "
            f"input passes ({_LEVEL_TEXT[level]}) and, when optimized, to the differential "
            "check. Fix the input to get an output that passes the full check"
        )


def _ort_refusal(path: Path) -> str:
    """Why ONNX Runtime (CPU, no graph optimization) cannot load the model at `path`; ""
    when it can."""
    import onnxruntime as ort  # type: ignore[import-untyped]

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    try:
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    except Exception as e:  # ORT raises many types
        return _first_line(e)
    return ""


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0][:300] if lines else ""
