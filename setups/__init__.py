"""The testbeds, in two worlds over one shared core.

The core (this folder): topologies as data (`topology`), the paper's testbeds (`paper`), MAP-T arithmetic
(`mapt`), the placement plan (`placement`), the steps a backend renders
(`steps`, `plan`, `backends/`), the transports that run them (`transports`), per-hop counters (`counters`)
and the `Chain` protocol the measurement drives (`chain`). The worlds build on it and never on each other:
`emulation/` runs a testbed in network namespaces on this machine, `testbed/` on real hosts over SSH.
"""

from .chain import Chain
from .mapt import Bmr, MapCe, flows_fit, map_ce
from .paper import TOPOLOGIES, topology

__all__ = ["TOPOLOGIES", "Bmr", "Chain", "MapCe", "flows_fit", "map_ce", "topology"]
