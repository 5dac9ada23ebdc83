"""A failing script's error as its user reads it (issue 33): no colour codes, the user's own frames, no "rank 0
raised" for one process, and a missing module said with the interpreter that ran the script."""

from __future__ import annotations

from profilers.run.script_errors import describe_rank_error, own_frames, strip_ansi

TRACE = """Traceback (most recent call last):
  File "/home/u/proj/train.py", line 12, in <module>
    main()
  File "/home/u/proj/train.py", line 8, in main
    model(x)
  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1532, in _call_impl
    return forward_call(*args, **kwargs)
\x1b[31mValueError\x1b[0m: bad shape"""


def test_colour_codes_are_stripped() -> None:
    assert strip_ansi("\x1b[1;31mError\x1b[0m: x") == "Error: x"


def test_library_frames_are_left_out_and_counted() -> None:
    text = own_frames(TRACE)
    assert "site-packages/torch" not in text and "\x1b" not in text
    assert 'train.py", line 8, in main' in text and "    model(x)" in text
    assert text.endswith(
        "ValueError: bad shape\n(1 library frame(s) left out: site-packages and the standard library)"
    )


def test_a_traceback_of_library_frames_only_keeps_the_innermost() -> None:
    only = (
        'Traceback (most recent call last):\n  File "/usr/lib/python3.11/runpy.py", line 1, in run\n    x\n'
        '  File "/v/lib/python3.11/site-packages/a.py", line 2, in f\n    y\nKeyError: 1'
    )
    text = own_frames(only)
    assert "runpy.py" not in text and 'site-packages/a.py", line 2' in text


def test_one_process_is_not_rank_0_and_a_missing_module_names_the_interpreter() -> None:
    err = {
        "rank": 0,
        "type": "ModuleNotFoundError",
        "message": "No module named 'timm'",
        "traceback": "",
    }
    one = describe_rank_error(err, 0, 1, "/opt/envs/base/bin/python")
    assert one.startswith(
        "ModuleNotFoundError: No module named 'timm' (the script ran under /opt/envs/base/bin/python"
    )
    many = describe_rank_error({**err, "rank": 3, "type": "ValueError"}, 1, 4, "/x/python")
    assert many.startswith(
        "rank 3 raised ValueError: No module named 'timm' (1 other rank(s) raised too)"
    )
