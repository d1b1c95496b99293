"""The one error an emulated testbed raises: what failed and how to fix it, in one line."""


class EmulationError(RuntimeError):
    """The emulation could not be brought up or found; the message says what to do."""
