"""One MFU per run: the evidence table's MFU row and the efficiency sentence beside it are one value written one
way (a walk read "MFU 1.6%" and "1.5%" in one table: the value rounded to 4 places, then to 1 decimal of %)."""

from __future__ import annotations

from profilers.efficiency.mfu import Efficiency, mfu_percent
from reports.evidence import evidence_value


def test_the_mfu_row_and_the_efficiency_sentence_say_one_number() -> None:
    mfu = 0.015496  # 1.5496%: 0.0155 once rounded to 4 places, which printed as 1.6%
    e = Efficiency(5.19, 335.0, "V100 SXM2, fp16", mfu, "shapes")
    assert (
        e.phrase().startswith("MFU 1.5% ")
        and evidence_value("mfu", mfu) == "1.5%" == f"{mfu_percent(mfu)}%"
    )
    assert evidence_value("mfu", 0.00024) == "0.024%" and e.phrase().count("%") == 1
