"""Build tools of the repository (tools/compile_core.py: the compiled core)."""
