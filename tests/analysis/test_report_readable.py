"""A readable report (issue 23, item 10): a short implementation tag in titles and tables, the full label once
under Conditions. (No clipped table at 1400 and 800 px: tests/analysis/test_html_report.py.)"""

from pathlib import Path

import storefix

from xlatbench.analysis.report import write_report
from xlatbench.data.records import implementation_label, implementation_tag

PATCHED = "0.9.2-8 (Debian source) + xlatbench patches: tayga-udp-zero-checksum tayga-wkpf-strict"
DUT = {"topology": "464xlat",
       "translators": {"dut1": {"implementation": "tayga", "version": PATCHED},
                       "dut2": {"implementation": "tayga", "version": PATCHED}}}


def test_the_tag_of_the_patched_tayga() -> None:
    label = implementation_label(DUT)
    assert len(label) > 180
    assert implementation_tag(DUT, label) == "tayga 0.9.2-8 + 2 patches"
    mixed = {"translators": {"dut1": {"implementation": "jool", "version": "4.1.9"},
                             "dut2": {"implementation": "tayga", "version": "0.9.2-8 (Debian)"}}}
    assert implementation_tag(mixed, "") == "dut1 jool 4.1.9, dut2 tayga 0.9.2-8"
    kernel = {"topology": "baseline", "kernel": {"version": "6.1"}}
    label = implementation_label(kernel)
    assert implementation_tag(kernel, label) == label == "baseline: linux forwarding (kernel 6.1)"


def test_titles_use_the_tag_and_conditions_the_full_label_once(tmp_path: Path) -> None:
    # Before: the ~200-character label in every title.
    ctx = storefix.context("464xlat", 1, DUT)
    store = storefix.write_store(tmp_path / "s.jsonl", [storefix.summary(ctx, 100_000, 99_000, 101_000)])
    _, text = write_report(store, tmp_path / "out")
    assert "**Throughput of 464xlat (tayga 0.9.2-8 + 2 patches), RFC 8219" in text
    assert text.count(implementation_label(DUT)) == 1
    assert f"- 464xlat: {implementation_label(DUT)}" in text.split("## Conditions", 1)[1]
