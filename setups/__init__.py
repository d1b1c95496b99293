"""The testbeds: topologies as data, MAP-T arithmetic, backends (jool, linux, tayga), transports and
emulation in network namespaces."""

from xlatbench.setups.chain import Chain, EmulatedChain
from xlatbench.setups.cleanup import down, leftovers
from xlatbench.setups.emulation import Emulation, EmulationConfig, EmulationError
from xlatbench.setups.mapt import Bmr, MapCe, flows_fit, map_ce
from xlatbench.setups.testbeds import TOPOLOGIES, topology

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
