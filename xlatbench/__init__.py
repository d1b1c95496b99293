"""xlatbench xlatbench."""
