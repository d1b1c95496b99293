"""RFC 9693's procedures in a campaign (scripts/stateful/procedures.py, run.py; analysis/stateful.py) on the
simulated stateful NAT: campaigns/stateful-simulated.toml gives back the known answers set in its [[setup]]
table, its records match the store schema and round-trip, a resume reproduces what it cut and measures nothing
twice, the report prints the draft's tables, bad campaign files are refused in one line, and the draft's
campaign plans (800 M connections on paper)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema
import pytest

from xlatbench.analysis.report import write_report
from xlatbench.cli import main as cli_main
from xlatbench.data.records import StatefulResult, record_from_json
from xlatbench.data.store import ResultStore
from xlatbench.scripts.campaign import CampaignRun, stateful_estimate_s
from xlatbench.scripts.campaignfile import CampaignFileError, parse_campaign
from xlatbench.scripts.stateful.procedures import expected_cps, procedure_time_s

REPO = Path(__file__).resolve().parents[2]
SIMULATED = REPO / "campaigns" / "stateful-simulated.toml"
DRAFT = REPO / "campaigns" / "scalability-draft.toml"


def data(path: Path = SIMULATED) -> dict:
    return tomllib.loads(path.read_text())


def run(store: Path, table: dict | None = None) -> CampaignRun:
    campaign = CampaignRun(parse_campaign(table or data(), "stateful.toml", store), progress=False)
    campaign.run()
    return campaign


def results(store: Path) -> list[StatefulResult]:
    return [r for r in ResultStore(store).records() if isinstance(r, StatefulResult)]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("stateful") / "s.jsonl"
    run(store)
    return store


def test_the_simulated_campaign_gives_back_its_known_answers(simulated: Path) -> None:
    found = results(simulated)
    assert len(found) == 3 * 4 * 3 + 4 * 3   # 3 core counts x 4 procedures x 3 repetitions, + the 2nd point
    for r in found:
        cores, size = r.context.cores, r.point["table_size"]
        assert r.value is not None and r.status == "ok", r.key
        if r.procedure == "connection-rate":     # the cap: 50 000/s x cores ** 0.9, noise 0.2 %
            assert abs(r.value - 50_000 * cores ** 0.9) <= 0.01 * 50_000 * cores ** 0.9 + r.error
        elif r.procedure == "throughput-connections":
            assert abs(r.value - 200_000 * cores ** 0.9) <= 0.01 * 200_000 * cores ** 0.9 + r.error
            assert r.outcome["table_grew"] == 0
        elif r.procedure == "teardown":
            assert abs(r.value - 350_000) <= 0.02 * 350_000 and r.outcome["removed"] == r.point["connections"]
        else:
            assert size - 1 <= r.value <= size      # E = 1
            assert r.outcome["cs"] <= size < r.outcome["ct"]
        assert r.conditions["implementation"] == "fake-stateful"


def test_stateful_records_validate_and_round_trip(simulated: Path) -> None:
    validator = jsonschema.Draft202012Validator(
        json.loads((REPO / "data" / "schema" / "store.schema.json").read_text()))
    lines = [json.loads(line) for line in simulated.read_text().splitlines()]
    kinds = {line["type"] for line in lines}
    assert kinds == {"stateful-trial", "stateful-result"}
    for line in lines[:: max(1, len(lines) // 200)] + [lines[-1]]:
        errors = [e.message for e in validator.iter_errors(line)]
        assert not errors, (line["key"], errors[:3])
        assert record_from_json(line).to_json() == line
    assert len({line["key"] for line in lines}) == len(lines)
    assert list(validator.iter_errors({**lines[-1], "procedure": "jitter"}))


def test_a_resume_reproduces_the_cut_and_measures_nothing_twice(tmp_path: Path) -> None:
    table = data()
    table["setup"][0]["noise"] = 0.0   # deterministic, so the resumed half equals an uninterrupted run
    whole, cut = tmp_path / "whole.jsonl", tmp_path / "cut.jsonl"
    run(whole, table)
    lines = whole.read_text().splitlines(keepends=True)
    cut.write_text("".join(lines[: len(lines) // 3]))
    resumed = run(cut, table)
    missing = lines[len(lines) // 3:]
    assert resumed.new_trials == sum(json.loads(x)["type"] == "stateful-trial" for x in missing)

    def values(path: Path) -> dict[str, object]:
        # the search's elapsed time is the simulated clock's, which replayed calls do not advance
        return {r.key: (r.value, {k: v for k, v in r.outcome.items() if k != "elapsed_s"})
                for r in results(path)}
    assert values(cut) == values(whole)
    assert run(whole, table).new_trials == 0


def test_the_report_prints_the_drafts_tables(simulated: Path, tmp_path: Path) -> None:
    write_report(simulated, tmp_path)
    text = (tmp_path / "tables.csv").read_text()
    assert "RFC 9693 against the number of CPU cores: sim-nat44, 80,000 connections" in text
    assert "cps rel. scale up,1.000," in text and "conn. tear-down rate (connections/s)" in text
    assert "RFC 9693 connection tracking table capacity: sim-nat44, 4 DUT core(s), table size 400,000" in text
    assert "DUT implementation fake-stateful (nat44)" in text
    html = (tmp_path / "report.html").read_text()
    assert 'id="stateful"' in html and "C0" in html


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["setup"].__setitem__(0, {"name": "f", "kind": "fake", "capacity_qps": 1000}),
     "[[setup]] #1 (f): kind 'fake' has no stateful DUT"),
    (lambda d: d["procedure"][3].__setitem__("beta", 1.5), "(table-capacity): beta must be in (0, 1)"),
    (lambda d: d["procedure"][3].__setitem__("gamma", 0), "gamma"),
    (lambda d: d["procedure"][0].__setitem__("alpha", 2), "alpha must be in (0, 1]"),
    (lambda d: d.pop("stateful"), "need a [stateful] table"),
    (lambda d: d["stateful"]["point"][0].__setitem__("source_ports", 999), "source_addresses x source_ports"),
    (lambda d: d["procedure"][2].__setitem__("setup_rate_cps", 10.0), "timeout_s 3600 s is shorter"),
    (lambda d: d["procedure"][1].__setitem__("search", "nope"), "search 'nope' names no [[search]]"),
    (lambda d: d["procedure"][0].__setitem__("typo", 1), "unknown key(s) ['typo']"),
])
def test_bad_stateful_campaigns_are_one_line(change, message: str) -> None:
    table = data()
    change(table)
    with pytest.raises(CampaignFileError) as err:
        parse_campaign(table, "stateful.toml")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_more_connections_than_the_flows_is_one_line_at_run(tmp_path: Path, capsys) -> None:
    table = data()
    table["setup"][0]["max_flows"] = 50_000
    path = tmp_path / "c.toml"
    path.write_text(_toml(table))
    assert cli_main(["campaign", "run", str(path), "--store", str(tmp_path / "s.jsonl"),
                     "--no-progress"]) == 1
    lines = [x for x in capsys.readouterr().err.splitlines() if "distinct flows" in x]
    assert len(lines) == 1 and "connections 80,000 is more than the 50,000 distinct flows" in lines[0]


def test_the_drafts_campaign_plans_800_million_connections() -> None:
    table = data(DRAFT)
    assert table["setup"][0]["kind"] == "testbed"
    table["setup"] = [{"name": "iptables-nat44", "kind": "fake-stateful", "table_size": 1 << 22,
                       "max_cps": 1e6, "cores_available": 16}]   # the testbed's inventory needs its hosts
    campaign = parse_campaign(table, "draft.toml")
    assert campaign.stateful is not None
    biggest = max(campaign.stateful.points, key=lambda p: p.connections)
    assert biggest.connections == 800_000_000 and biggest.table.max_connections == 1 << 30
    spec = next(s for s in campaign.stateful.procedures if s.kind == "connection-rate")
    seconds, _ = procedure_time_s(spec, biggest, dict(campaign.searches), expected_cps(campaign.stateful))
    # 5 repetitions of a search whose every phase-1 trial sends 800 M queries at about 1.4 M/s: hours.
    assert 5 * 10 * 800e6 / 4e6 < seconds < 5 * 14 * (800e6 / 0.7e6 + 10)
    total = stateful_estimate_s(campaign, {"iptables-nat44": [1, 2, 4, 8, 16]})
    assert 50 * 3600 < total < 200 * 3600


def _toml(table: dict) -> str:
    """Enough TOML for these tables (a writer is not a dependency)."""
    lines: list[str] = []

    def value(v: object) -> str:
        return json.dumps(v) if not isinstance(v, bool) else str(v).lower()

    def scalars(t: dict) -> None:
        lines.extend(f"{k} = {value(v)}" for k, v in t.items() if not isinstance(v, dict | list) or
                     (isinstance(v, list) and not any(isinstance(x, dict) for x in v)))
    for key, item in table.items():
        if isinstance(item, list) and item and isinstance(item[0], dict):
            for entry in item:
                lines.append(f"[[{key}]]")
                scalars(entry)
        else:
            lines.append(f"[{key}]")
            scalars(item)
            for sub, entries in item.items():
                if isinstance(entries, list) and entries and isinstance(entries[0], dict):
                    for entry in entries:
                        lines.append(f"[[{key}.{sub}]]")
                        scalars(entry)
    return "\n".join(lines) + "\n"


def test_the_drafts_campaign_file_plans_as_written(capsys, monkeypatch) -> None:
    """`xlatbench campaign plan campaigns/scalability-draft.toml`, its testbed setup as written (the
    baseline's nat44 gateway; placeholder hosts that do not answer): planned at the inventory's 16 cores,
    800 M connections on paper, the total printed."""
    monkeypatch.chdir(REPO)
    assert cli_main(["campaign", "plan", str(DRAFT)]) == 0
    out = capsys.readouterr().out
    assert "planned at 16 core(s), CPU 0 + the inventory's offline_cpus" in out
    assert "16 core(s), 800,000,000 connections (table 1073741824, hash 268435456): connection-rate" in out
    total = out.splitlines()[-1]
    assert "RFC 9693 procedures: ~" in total and total.split("total: ~")[1].startswith(tuple("0123456789"))
    hours = float(total.split("total: ~")[1].split(" h")[0])
    assert 50 < hours < 200


@pytest.mark.parametrize("topology", ["nat44", "plat", "ce"])
def test_the_emulated_stateful_topologies_are_taken(topology: str) -> None:
    table = data()
    table["setup"] = [{"name": "s", "kind": "chain", "topology": topology}]
    assert parse_campaign(table, "stateful.toml").stateful is not None


def test_a_topology_without_a_stateful_nat_is_one_line() -> None:
    table = data()
    table["setup"] = [{"name": "s", "kind": "chain", "topology": "clat"}]
    with pytest.raises(CampaignFileError) as err:
        parse_campaign(table, "stateful.toml")
    assert "use topology 'nat44' or 'plat' or 'ce'" in str(err.value) and "\n" not in str(err.value)


def test_a_point_of_the_capacity_search_alone_stays_out_of_the_metrics_tables(tmp_path: Path) -> None:
    table = data()
    table["stateful"]["point"][1]["procedures"] = ["table-capacity"]
    store = tmp_path / "s.jsonl"
    run(store, table)
    write_report(store, tmp_path / "report")
    csv = (tmp_path / "report" / "tables.csv").read_text()
    connections = [line for line in csv.splitlines() if line.startswith("num. conn.,")]
    assert connections and all("320,000" not in line for line in connections)   # no metrics column for it
    assert "table size 400,000" in csv
