"""A testbed emulated on this machine: one network namespace per host, veth pairs as links, the DUTs
confined to CPUs of their own, the root sysctls leased and given back, and a cleanup that finds everything
by its prefix (also after kill -9)."""

from .chain import EmulatedChain
from .cleanup import down, leftovers
from .emulator import Emulation, EmulationConfig
from .errors import EmulationError

__all__ = ["EmulatedChain", "Emulation", "EmulationConfig", "EmulationError", "down", "leftovers"]
