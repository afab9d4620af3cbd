"""The error hierarchy: every failure a user can cause is a `RewriteError` with one clear line.

`RewriteError` -> `ModelError` (the input or output model), `RuleError` (a rule or rule file),
`VerificationError` (a proof or differential check; `UncheckableError`: no inputs the
input model runs on), `ExtractionError` (no valid choice),
`LimitError` (a resource limit that cannot be honoured). The CLI prints `str(err)` and exits
non-zero; anything that is not a `RewriteError` is our bug and keeps its traceback.
"""

from __future__ import annotations


class RewriteError(Exception):
    """Base of every error the user can cause; `str()` is one line naming file, node or rule."""


class ModelError(RewriteError):
    """The model (file, protobuf, graph or opset) cannot be read, optimized or written."""


class ShapeError(ModelError):
    """An op's inputs have shapes or dtypes the op does not accept."""


class RuleError(RewriteError):
    """A rule or rule file is malformed, unknown or unsound."""


class VerificationError(RewriteError):
    """A rule proof or a differential check failed."""


class UncheckableError(VerificationError):
    """The input model loads in ONNX Runtime but runs on none of the generated inputs, and no
    user inputs were given: nothing can be compared, though the model itself may be valid."""


class ExtractionError(RewriteError):
    """An extractor returned no valid choice (missing class, cycle, unreachable output)."""
