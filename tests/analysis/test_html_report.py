"""report.html rendered in headless Chromium: every table, figure and verdict is in the DOM, every embedded
image decodes, and the screenshot is not blank. The store holds the paper's Tables 1-3 plus an idle capture
with latency and a failing trial, so every part of the report is present.

XLATBENCH_SCREENSHOT=PATH also keeps this test's screenshot there.
"""

import os
import re
import shutil
from pathlib import Path

import matplotlib.image
import pytest
import storefix

from xlatbench.analysis.browser import dump_dom, screenshot
from xlatbench.analysis.report import write_report

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None,
                                reason="chromium not installed (tools/install-deps installs it)")

CORES = [1, 2, 4, 8, 16]
# Lencse & Nagy 2022, Tables 1-3: medians, minima, maxima (queries/s).
PAPER = {
    "baseline": ([420055, 732441, 1469081, 2028763, 2009385], [416256, 722655, 1445306, 2011487, 1981189],
                 [420322, 734943, 1479493, 2031865, 2032509]),
    "464xlat": ([165403, 236869, 425021, 510155, 530064], [163280, 236185, 420311, 499999, 529881],
                [167041, 237553, 425782, 510321, 530222]),
    "mapt": ([143498, 250858, 475051, 835180, 1183615], [140624, 245311, 470311, 812499, 1179686],
             [145314, 251953, 475818, 837295, 1184387]),
}
TAYGA = {"topology": "464xlat", "namespaces": {"dut1": "x-dut1"},
         "translators": {"dut1": {"implementation": "tayga", "version": "0.9.2", "tun_device": "nat64"},
                         "dut2": {"implementation": "tayga", "version": "0.9.2", "tun_device": "nat64"}},
         "knot": {"implementation": "knot", "version": "3.2.6"}}
LINUX = {"topology": "baseline", "namespaces": {"dut1": "x-dut1"}, "translators": {},
         "kernel": {"implementation": "linux", "version": "6.1"}}
PLACEMENT = {"cores": 1, "cpus": [1], "applied": {"dut1": {"cpus": [1]}, "dut2": {"cpus": [2]}}}


def context(setup, cores, campaign_file):
    dut = LINUX if setup == "baseline" else {**TAYGA, "topology": setup}
    return storefix.context(setup, cores, dut, campaign="known-answer", campaign_file=str(campaign_file),
                            dut_cpus=PLACEMENT, options={"knot_cpus": [0]},
                            tester={"tool": "xlatperf", "version": "0.1.0",
                                    "options": {"timeout_s": 0.25, "threads": 1, "sender_cpus": "0"}},
                            host={"cpu_model": "Test CPU", "cpus_online": 3, "kernel": "6.1"})


def idle(campaign_file):
    cpus = {"0": {"idle": 30.0}, "1": {"idle": 2.0, "softirq": 20.0, "usr": 78.0}, "2": {"idle": 55.0}}
    per_second = [{"second": s, "runs": 2, "cpus": cpus} for s in range(1, 11)]
    ctx = context("464xlat", 1, campaign_file)
    runs = [storefix.idle_run(ctx, run, 165403,
                              {"duration_s": 10.0, "sent": 1_654_030, "valid": 1_654_030,
                               "dut_stats": {"cpu_s": {"dut1": 9.5, "dut2": 4.0}}},
                              raw={"latency": {"p50": p50, "p999": p999, "resolution_s": 1e-9,
                                               "relative_resolution": 1 / 1024, "of": "valid replies"}})
            for run, (p50, p999) in enumerate([(0.0002, 0.004), (0.0003, 0.006)], start=1)]
    drops = {"counters": {"dut1:nat64": {"tx_dropped": 3000}}}
    failing = storefix.trial(ctx, 3, 166000, "fail",
                             {"duration_s": 60, "loss_ratio": 0.002, "dut_stats": drops,
                              "host_steal_pct": {"0": 6.5, "1": 0.4, "2": 0.0}})
    return [*runs, failing, storefix.idle_mean(ctx, 165403, 2, per_second)]


@pytest.fixture
def report_dir(tmp_path):
    campaign_file = tmp_path / "known.toml"
    campaign_file.write_text('[campaign]\nname = "known-answer"\n# the exact file is shown in the report\n')
    records = [storefix.summary(context(setup, c, campaign_file), m, lo, hi)
               for setup, rows in PAPER.items() for c, m, lo, hi in zip(CORES, *rows, strict=True)]
    records += idle(campaign_file)
    store = storefix.write_store(tmp_path / "store.jsonl", records)
    write_report(store, tmp_path / "out")
    return tmp_path / "out"


def test_every_table_figure_and_verdict_is_in_the_rendered_dom(report_dir):
    dom = dump_dom(report_dir / "report.html")
    titles = re.findall(r'<table data-table="([^"]*)"', dom)
    # Tables 1-3, the medians side by side, the latency table.
    assert len(titles) == 5, titles
    assert sum("Throughput of" in t for t in titles) == 3
    assert any(t.startswith("Idle-capture latency") for t in titles)
    for median in ("420,055", "2,009,385", "165,403", "1,183,615"):
        assert median in dom
    pngs = sorted(p.name for p in report_dir.glob("*.png"))
    # throughput vs cores, latency, one idle figure per DUT.
    assert len(pngs) == 4, pngs
    assert sorted(re.findall(r'data-figure="([^"]*)"', dom)) == pngs
    assert f'data-images-decoded="{len(pngs)}"' in dom
    assert dom.count("data-verdict") == 1 and "bottleneck dut1" in dom
    assert "0.250" in dom and "5.000" in dom  # typical 0.25 ms, worst case 5 ms (medians of two trials)
    assert "the exact file is shown in the report" in dom
    assert "shared with the tester/Knot" not in dom  # DUT CPUs 1 and 2, tester and Knot on CPU 0
    # The one trial lost 6.5 % of CPU 0 to the hypervisor: the conditions say so.
    assert "1 of 1 trials lost 2 % or more of a CPU to the hypervisor (at most 6.5 %, CPU 0)" in dom


def test_the_report_renders_to_a_non_blank_page(report_dir, tmp_path):
    png = screenshot(report_dir / "report.html", tmp_path / "report.png")
    pixels = matplotlib.image.imread(png)[..., :3]
    ink = (pixels.min(axis=2) < 0.85).mean()  # share of pixels that are not white or light grey
    assert pixels.shape[:2] == (2400, 1280)
    assert 0.03 < ink < 0.6, ink
    assert pixels.std() > 0.05
    if os.environ.get("XLATBENCH_SCREENSHOT"):
        shutil.copy(png, Path(os.environ["XLATBENCH_SCREENSHOT"]))


@pytest.mark.parametrize("width", [1400, 800])
def test_no_table_is_clipped(report_dir, width):
    # Each table cell and each table's box is as wide as its content (scrollWidth <= clientWidth): before,
    # the two-column grid of narrow tables cut numbers to "262,5" and "0.".
    dom = dump_dom(report_dir / "report.html", width=width)
    clipped = re.search(r'data-clipped="(\d+)"', dom)
    assert clipped is not None, "the page's load script ran"
    text = re.search(r'data-clipped-text="([^"]*)"', dom)
    assert clipped.group(1) == "0", text.group(1) if text else ""
