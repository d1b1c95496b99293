"""xlatbench zones."""
