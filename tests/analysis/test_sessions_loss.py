"""The sessions table shows the loss that matters (issue 31, item 5): at each search's throughput and in its
failed trial just above it, not the overload trial a binary search starts with."""

from __future__ import annotations

from pathlib import Path

import storefix

from xlatbench.analysis.series import load_campaign
from xlatbench.analysis.sessions import sessions_tables

DUT = {"namespaces": {}, "translators": {"dut1": {"implementation": "tayga", "version": "0.9.2"}}}


def test_the_loss_at_and_just_above_the_throughput(tmp_path: Path) -> None:
    records = []
    for sessions, scale in ((1, 1.0), (1000, 0.5)):
        ctx = storefix.context("464xlat", 1, DUT, sessions=sessions, swept=True)
        # A binary search from 100,000 at scale 1: 80 % lost at the top, then the bracket closes on 75,000.
        steps = [(100_000, "fail", 0.8), (50_000, "pass", 0.0), (75_000, "pass", 0.00005),
                 (87_500, "fail", 0.02), (81_250, "fail", 0.003)]
        records += [storefix.trial(ctx, step, rate * scale, verdict, {"duration_s": 60.0, "loss_ratio": loss})
                    for step, (rate, verdict, loss) in enumerate(steps)]
        records.append(storefix.summary(ctx, 75_000 * scale, 75_000 * scale, 75_000 * scale, n=1))
    campaign = load_campaign(storefix.write_store(tmp_path / "s.jsonl", records))
    [table] = sessions_tables(campaign.series, campaign.records)
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["Loss at the throughput (%, its passing trial; worst repetition)"] == ["0.005", "0.005"]
    # The failed trial nearest above 75,000 is 81,250 (0.3 %), not the first overload trial (80 %).
    assert rows["Loss just above the throughput (%, the failed trial nearest above it; median of "
                "repetitions)"] == ["0.3", "0.3"]
