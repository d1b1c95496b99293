"""xlatbench setups."""
