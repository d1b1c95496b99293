"""Why a trial is void rather than a result: `ComponentFailure`, a part the trial depends on (knotd, a
translator, a testbed host) failed during it, so its loss says nothing about the DUT or the tester.

It lives in the foundation (xlatbench/) because both sides raise or catch it: the measurement (scripts/: the
measurers raise it for a dead process, the campaign stores the trial as void) and the testbed
(setups/testbed: HostLost, a host that stopped answering, is one); setups/ never imports scripts/.
"""

from __future__ import annotations


class ComponentFailure(RuntimeError):
    """A process the trial depends on (knotd, a translator) died during it: the trial is void."""
