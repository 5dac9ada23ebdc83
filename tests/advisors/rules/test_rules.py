"""Every rule's own examples are its tests: ``fires`` must produce a finding of that rule with the fix and severity
the example states, ``passes`` must not. Rules are run the way the diagnosis runs them, through ``evaluate()``."""

from __future__ import annotations

import pytest

from advisors.fixes import FIXES
from advisors.verdict import Bottleneck
from advisors.rules import RULES, Rule, rule_by_id
from advisors.rules.base import NOT_STATED

EXAMPLES = [(r, e, True) for r in RULES for e in r.fires] + [
    (r, e, False) for r in RULES for e in r.passes
]


@pytest.mark.parametrize(
    ("rule", "example", "should_fire"),
    EXAMPLES,
    ids=[f"{r.id}-{'fires' if s else 'passes'}-{e.label[:40]}" for r, e, s in EXAMPLES],
)
def test_rule_examples(rule: type[Rule], example, should_fire: bool) -> None:
    finding = rule().evaluate(example.facts())
    if should_fire:
        assert finding is not None, f"{rule.id} should fire on: {example.label}"
        assert finding.rule == rule.id and finding.bottleneck == rule.bottleneck
        assert 0.0 <= finding.severity <= 1.0 and 0.0 < finding.confidence <= 1.0
        assert finding.message.endswith(".") and finding.evidence
        assert finding.fix_id is None or finding.fix_id in FIXES
        assert example.fix != NOT_STATED and example.severity is not None, (
            "a fires example pins its fix and severity"
        )
        assert finding.fix_id == example.fix, (
            f"{rule.id} on {example.label!r}: fix {finding.fix_id}"
        )
        assert finding.severity == pytest.approx(example.severity, abs=1e-3), (
            f"{rule.id} on {example.label!r}"
        )
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
    from advisors.accounting import CAUSES

    assert rule.cause in CAUSES, "every rule names the time it looks at"


def test_rule_ids_are_unique_and_stable() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    assert rule_by_id("DATA001").name == "loader-starves-step"
    classes = {r.bottleneck for r in RULES}
    assert classes >= {
        Bottleneck.DATA,
        Bottleneck.MEMORY,
        Bottleneck.COMPUTE,
        Bottleneck.COMMUNICATION,
        Bottleneck.HOST,
    }


def test_thresholds_override_and_reject_unknown() -> None:
    rule = rule_by_id("DATA001")
    example = rule.fires[0].facts()  # 34% exposed
    assert rule().evaluate(example) is not None
    assert rule({"moderate_share": 0.5}).evaluate(example) is None
    with pytest.raises(ValueError, match="unknown threshold"):
        rule({"no_such_threshold": 1.0})


def test_data001_levels() -> None:
    from advisors.synthetic import observation
    from advisors.facts import derive

    rule = rule_by_id("DATA001")()
    moderate = rule.evaluate(derive(observation({"gpu_compute": 0.8, "dataloader": 0.08})))
    high = rule.evaluate(derive(observation({"gpu_compute": 0.6, "dataloader": 0.3})))
    assert moderate is not None and moderate.evidence["level"] == "moderate"
    assert high is not None and high.evidence["level"] == "high"
    assert high.confidence > moderate.confidence


class _Sees(Rule):
    """A rule that cannot judge anything (test double). Thresholds: none."""

    id, name, bottleneck, cause, thresholds = (
        "TEST001",
        "never-judges",
        Bottleneck.COMPUTE,
        "device_time",
        {},
    )
    calls = 0

    def missing(self, f):
        return "nothing to see"

    def check(self, f):
        type(self).calls += 1
        return self.finding(f, 0.5, 0.9, "should never be produced.", {"x": 1.0})


def test_evaluate_asks_missing_before_check() -> None:
    from advisors.diagnosis import diagnose
    from advisors.synthetic import observation

    d = diagnose(observation({"gpu_compute": 0.5}), rules=(_Sees,))
    assert d.binding is None and _Sees.calls == 0
    assert any(n.reason == "nothing to see" for n in d.notes)


def test_facts_have_defaults_so_a_case_states_only_what_it_is_about() -> None:
    from advisors.facts import Facts

    assert all(rule().evaluate(Facts()) is None for rule in RULES)  # nothing known: nothing judged
    cpu = Facts(has_steps=True, device="cpu", n_steps=4, shares={"forward": 0.4, "backward": 0.5})
    finding = rule_by_id("COMP002")().evaluate(cpu)
    assert (
        finding is not None
        and finding.severity == pytest.approx(0.9)
        and finding.fix_id == "torch_compile"
    )
