"""The echo server: the zone the tester asks and the Knot DNS server that answers it."""

from .knot import KnotConfig, KnotError, KnotServer
from .zonefile import query_name, write_zone

__all__ = ["KnotConfig", "KnotError", "KnotServer", "query_name", "write_zone"]
