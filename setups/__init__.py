"""The testbeds: topologies as data, MAP-T arithmetic, backends (jool, linux, tayga), transports and
emulation in network namespaces."""

from .chain import Chain, EmulatedChain
from .cleanup import down, leftovers
from .emulation import Emulation, EmulationConfig, EmulationError
from .mapt import Bmr, MapCe, flows_fit, map_ce
from .testbeds import TOPOLOGIES, topology

__all__ = [
    "TOPOLOGIES",
    "Bmr",
    "Chain",
    "EmulatedChain",
    "Emulation",
    "EmulationConfig",
    "EmulationError",
    "MapCe",
    "down",
    "flows_fit",
    "leftovers",
    "map_ce",
    "topology",
]
