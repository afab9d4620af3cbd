"""Test-wide setup: caches go to a per-session temporary folder, never the user's."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("REWRITE_CACHE_DIR", tempfile.mkdtemp(prefix="rewrite-test-cache-"))
