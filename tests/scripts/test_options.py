"""Chain options from the command line and campaign files reach the setups part with the right types."""

import pytest

from xlatbench.scripts.cli import _option_value
from xlatbench.scripts.envs import emulation_config


@pytest.mark.parametrize(("text", "value"), [
    ("[0]", [0]), ("[0, 1]", [0, 1]), ("0,1", [0, 1]), ("2", 2), ("true", True), ("xb1", "xb1"),
    ('"xb1"', "xb1"),
])
def test_command_line_values_read_as_toml_would(text: str, value: object) -> None:
    assert _option_value(text) == value


@pytest.mark.parametrize("given", [[0], 0, "0", "[0]"])
def test_cpu_lists_in_any_spelling_become_tuples(given: object) -> None:
    assert emulation_config("464xlat", knot_cpus=given).knot_cpus == (0,)


def test_cpu_list_that_is_not_numbers_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="knot_cpus.*list of CPU numbers"):
        emulation_config("464xlat", knot_cpus="one")


def test_unknown_chain_option_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="chain options"):
        emulation_config("464xlat", knot_cpu=[0])
