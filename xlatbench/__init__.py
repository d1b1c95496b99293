"""xlatbench: a benchmark suite for IPv4-as-a-Service translators."""

__version__ = "0.1.0"
