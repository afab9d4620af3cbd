"""rewrite: an equality-saturation optimizer for ONNX models, verified."""

__version__ = "0.1.0"
