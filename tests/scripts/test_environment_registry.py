"""The registry of environment kinds (scripts/environments/registry.py): it lists the kinds, an unknown
kind is one line naming the known ones, and the campaign-file parser knows no kind by name (a kind registered
here alone is parsed, checked and built). No root: the environments are only built, never brought up."""

from __future__ import annotations

from typing import Any

import pytest

from xlatbench.scripts.campaignfile import CampaignFileError, parse_campaign
from xlatbench.scripts.environments import registry
from xlatbench.scripts.environments.base import EnvironmentKind, SetupSpec
from xlatbench.scripts.environments.emulated import ChainEnvironment
from xlatbench.scripts.environments.loopback import LoopbackEnvironment
from xlatbench.scripts.environments.options import OptionError, number
from xlatbench.scripts.environments.simulated import FakeEnvironment
from xlatbench.scripts.environments.testbed import TestbedEnvironment
from xlatbench.scripts.xlatperf import TesterOptions

SEARCH = {"name": "s", "max_rate_qps": 20000, "error_qps": 500, "duration_s": 1, "rest_s": 0,
          "repetitions": 1}


def campaign(*setups: dict[str, Any]) -> dict[str, Any]:
    return {"campaign": {"name": "reg", "cores": [1]}, "search": SEARCH, "setup": list(setups)}


def test_the_registry_lists_the_kinds_each_under_its_own_name() -> None:
    assert registry.names() == ("fake", "loopback", "chain", "testbed", "fake-stateful")
    for name in registry.names():
        kind = registry.kind(name)
        assert isinstance(kind, EnvironmentKind) and kind.name == name and kind.summary


@pytest.mark.parametrize("given", ["vm", "", 3, None, ["chain"]])
def test_an_unknown_kind_is_one_line_naming_the_known_ones(given: object) -> None:
    with pytest.raises(CampaignFileError) as err:
        parse_campaign(campaign({"name": "x", "kind": given}), "c.toml")
    text = str(err.value)
    assert "\n" not in text
    assert text == ("[[setup]] #1: kind must be one of ['fake', 'loopback', 'chain', 'testbed', "
                    f"'fake-stateful'], got {given!r}")


def test_each_kind_builds_its_own_environment(tmp_path) -> None:
    tester = TesterOptions()
    built = {
        "fake": registry.make_environment(SetupSpec("f", "fake", {"capacity_qps": 1000}), tester),
        "loopback": registry.make_environment(SetupSpec("l", "loopback", {}), tester),
        "chain": registry.make_environment(SetupSpec("c", "chain", {"topology": "464xlat"}), tester),
        "testbed": registry.make_environment(SetupSpec("t", "testbed", {"inventory": "inv.toml"}), tester),
    }
    assert isinstance(built["fake"], FakeEnvironment) and built["fake"].capacity_qps == 1000
    assert isinstance(built["loopback"], LoopbackEnvironment)
    assert isinstance(built["chain"], ChainEnvironment) and built["chain"].topology == "464xlat"
    assert isinstance(built["testbed"], TestbedEnvironment) and built["testbed"].inventory == "inv.toml"


class ToyKind(EnvironmentKind):
    """A kind the parser has never heard of: a fake DUT whose capacity is `qps`."""

    name = "toy"
    runs_tester = False
    keys = frozenset({"qps"})

    def check(self, table: dict[str, Any], where: str) -> None:
        if "qps" not in table:
            raise OptionError(f"{where}: a toy setup needs qps")
        number(0, inclusive=False)(f"{where} qps", table["qps"])

    def build(self, setup: SetupSpec, tester: TesterOptions) -> FakeEnvironment:
        return FakeEnvironment(capacity_qps=float(setup.params["qps"]))


def test_a_kind_registered_alone_is_parsed_checked_and_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.REGISTRY, "toy", ToyKind())
    parsed = parse_campaign(campaign({"name": "t", "kind": "toy", "qps": 1234}), "c.toml")
    assert parsed.setups == (SetupSpec("t", "toy", {"qps": 1234}),)
    env = registry.make_environment(parsed.setups[0], parsed.tester)
    assert isinstance(env, FakeEnvironment) and env.capacity_qps == 1234
    with pytest.raises(CampaignFileError, match=r"^\[\[setup\]\] #1: a toy setup needs qps$"):
        parse_campaign(campaign({"name": "t", "kind": "toy"}), "c.toml")
    with pytest.raises(CampaignFileError, match=r"^\[\[setup\]\] #1 qps must be a number > 0, got -1$"):
        parse_campaign(campaign({"name": "t", "kind": "toy", "qps": -1}), "c.toml")
    with pytest.raises(CampaignFileError, match=r"unknown key\(s\) \['capacity_qps'\]; allowed: "):
        parse_campaign(campaign({"name": "t", "kind": "toy", "qps": 1, "capacity_qps": 5}), "c.toml")
