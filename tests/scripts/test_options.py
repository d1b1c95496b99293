"""Chain options from the command line and campaign files reach the setups part with the right types."""

import pytest

from xlatbench.scripts.campaignfile import load_campaign
from xlatbench.scripts.environments.emulated import emulation_config, option_value


@pytest.mark.parametrize(("text", "value"), [
    ("[0]", [0]), ("[0, 1]", [0, 1]), ("0,1", [0, 1]), ("2", 2), ("true", True), ("xb1", "xb1"),
    ('"xb1"', "xb1"),
])
def test_command_line_values_read_as_toml_would(text: str, value: object) -> None:
    assert option_value(text) == value


@pytest.mark.parametrize("given", [[0], 0, "0", "[0]", "[ 0 ]"])
def test_cpu_lists_in_any_spelling_become_tuples(given: object) -> None:
    assert emulation_config("464xlat", knot_cpus=given).knot_cpus == (0,)


def test_a_cpu_list_with_brackets_and_spaces_is_read_whole() -> None:
    assert emulation_config("464xlat", knot_cpus="[0, 1]").knot_cpus == (0, 1)


def test_cpu_list_that_is_not_numbers_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="knot_cpus.*list of CPU numbers"):
        emulation_config("464xlat", knot_cpus="one")


def test_unknown_chain_option_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="chain options"):
        emulation_config("464xlat", knot_cpu=[0])


def test_a_campaign_files_tester_cpus_reach_the_tester_in_its_grammar(tmp_path) -> None:
    # "[0]" is how a campaign file may spell it; xlatperf's --sender-cpus takes "0" only.
    path = tmp_path / "c.toml"
    path.write_text('[campaign]\nname = "c"\ncores = [1]\n'
                    '[search]\nmax_rate_qps = 20000\nerror_qps = 500\nduration_s = 1\nrest_s = 0\n'
                    '[tester]\nsender_cpus = "[0]"\nreceiver_cpus = " 0 "\n'
                    '[[setup]]\nname = "sim"\nkind = "fake"\ncapacity_qps = 5000\n')
    tester = load_campaign(path, store=tmp_path / "s.jsonl").tester
    assert (tester.sender_cpus, tester.receiver_cpus) == ("0", "0")
