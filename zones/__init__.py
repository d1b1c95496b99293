"""The echo server: the zone the tester asks and the Knot DNS server that answers it."""

from .knot import IO_MODES, KnotConfig, KnotError, KnotServer, check_io
from .zonefile import query_name, write_zone

__all__ = ["IO_MODES", "KnotConfig", "check_io", "KnotError", "KnotServer", "query_name", "write_zone"]
