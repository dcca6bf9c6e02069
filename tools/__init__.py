"""Scripts the CI workflows run (.github/workflows/, docs/ci.md)."""
