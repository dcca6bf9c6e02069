"""Where the project lives on disk: the one definition every package and test reads. Standard library only, so the
pipeline's bare-runner tools can import it too."""

from __future__ import annotations

from pathlib import Path

# stack/ sits directly under the project root.
PROJECT_ROOT = Path(__file__).resolve().parent.parent
