"""``analyze``'s last resort: an exception nobody foresaw while reading an input is one ``error:`` line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

import cli.advisors as cli


def _boom(exc: BaseException):
    def observe(*_args, **_kwargs):
        raise exc

    return observe


def test_unexpected_exception_is_one_error_line(tmp_path: Path, monkeypatch, capsys):
    path = tmp_path / "t.json"
    path.write_text("{}")
    monkeypatch.setattr(cli, "analyse", _boom(ValueError("a value\nno reader expected")))
    assert cli.main(["analyze", str(path), "--json"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == f"error: could not analyse {path}: ValueError: a value no reader expected\n"


def test_unexpected_exception_with_report_too(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "analyse", _boom(OverflowError("Python int too large")))
    assert cli.main(["analyze", str(tmp_path), "--report", str(tmp_path / "r.html")]) == 2
    assert (
        capsys.readouterr().err
        == f"error: could not analyse {tmp_path}: OverflowError: Python int too large\n"
    )


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3)])
def test_interrupt_and_exit_are_not_swallowed(tmp_path: Path, monkeypatch, exc: BaseException):
    monkeypatch.setattr(cli, "analyse", _boom(exc))
    with pytest.raises(type(exc)):
        cli.main(["analyze", str(tmp_path)])
