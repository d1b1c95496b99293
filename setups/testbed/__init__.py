"""A testbed of real hosts driven over SSH: the inventory, the SSH transport, the undo journal, CPU
hotplug, the preflight, remote idle sampling and runs, the testbed chain and its CLI. Everything it changes
on a host is journalled and undone by `down`."""

from .chain import TestbedChain, testbed_chain

__all__ = ["TestbedChain", "testbed_chain"]
