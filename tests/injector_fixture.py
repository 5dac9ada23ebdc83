"""The ``injected`` fixture of the in-process injection tests: ``injected(knobs, **kw)`` builds and installs an
:class:`~stepwise_agent.inject.Injector` (``device="cpu"`` unless given; other keywords go to it) and every one
made is uninstalled after the test. tests/conftest.py registers it for every test
(``pytest_plugins``)."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from stepwise_agent.inject import Injector


@pytest.fixture
def injected() -> Iterator[Any]:
    made: list[Injector] = []

    def make(knobs: dict[str, Any], device: str = "cpu", **kw: Any) -> Injector:
        inj = Injector(knobs, device=device, **kw)
        inj.install()
        made.append(inj)
        return inj

    yield make
    for inj in reversed(made):  # the last installed wraps the others: it is undone first
        inj.uninstall()
