"""xlatbench analysis."""
