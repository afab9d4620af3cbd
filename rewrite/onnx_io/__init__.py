"""Reading and writing ONNX models: `load` (file -> checked `Graph`), `save` (atomic, checked)."""

from rewrite.onnx_io.graph import Graph, Node
from rewrite.onnx_io.load import load
from rewrite.onnx_io.save import save, to_model

__all__ = ["Graph", "Node", "load", "save", "to_model"]
