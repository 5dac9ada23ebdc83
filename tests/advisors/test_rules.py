"""Every rule's own examples are its tests: ``fires`` must produce a finding of that rule, ``passes`` must not."""

from __future__ import annotations

import pytest

from advisors.fixes import FIXES
from advisors.model import Bottleneck
from advisors.rules import RULES, Rule, rule_by_id

EXAMPLES = [(r, e, True) for r in RULES for e in r.fires] + [(r, e, False) for r in RULES for e in r.passes]


@pytest.mark.parametrize(("rule", "example", "should_fire"), EXAMPLES,
                         ids=[f"{r.id}-{'fires' if s else 'passes'}-{e.label[:40]}" for r, e, s in EXAMPLES])
def test_rule_examples(rule: type[Rule], example, should_fire: bool) -> None:
    finding = rule().check(example.facts())
    if should_fire:
        assert finding is not None, f"{rule.id} should fire on: {example.label}"
        assert finding.rule == rule.id and finding.bottleneck == rule.bottleneck
        assert 0.0 <= finding.severity <= 1.0 and 0.0 < finding.confidence <= 1.0
        assert finding.message.endswith(".") and finding.evidence
        assert finding.fix_id is None or finding.fix_id in FIXES
    else:
        assert finding is None, f"{rule.id} should pass on: {example.label}, got {finding}"


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rule_is_self_describing(rule: type[Rule]) -> None:
    doc = rule.doc()
    assert doc["doc"] and "hreshold" in doc["doc"]
    assert rule.fires and rule.passes, "every rule needs examples that fire and that pass"
    assert all(isinstance(v, (int, float)) for v in rule.thresholds.values())
    assert rule.fix_id is None or rule.fix_id in FIXES
    assert isinstance(rule.bottleneck, Bottleneck) and rule.bottleneck is not Bottleneck.NONE


def test_rule_ids_are_unique_and_stable() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    assert rule_by_id("DATA001").name == "loader-starves-step"
    classes = {r.bottleneck for r in RULES}
    assert classes >= {Bottleneck.DATA, Bottleneck.MEMORY, Bottleneck.COMPUTE, Bottleneck.COMMUNICATION,
                       Bottleneck.HOST}


def test_thresholds_override_and_reject_unknown() -> None:
    rule = rule_by_id("DATA001")
    example = rule.fires[0].facts()  # 34% exposed
    assert rule().check(example) is not None
    assert rule({"moderate_share": 0.5}).check(example) is None
    with pytest.raises(ValueError, match="unknown threshold"):
        rule({"no_such_threshold": 1.0})


def test_data001_levels() -> None:
    from advisors.synthetic import observation
    from advisors.facts import derive

    rule = rule_by_id("DATA001")()
    moderate = rule.check(derive(observation({"gpu_compute": 0.8, "dataloader": 0.08})))
    high = rule.check(derive(observation({"gpu_compute": 0.6, "dataloader": 0.3})))
    assert moderate is not None and moderate.evidence["level"] == "moderate"
    assert high is not None and high.evidence["level"] == "high"
    assert high.confidence > moderate.confidence
