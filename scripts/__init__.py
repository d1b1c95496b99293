"""xlatbench scripts."""
