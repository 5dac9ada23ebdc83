"""Upload page: a real trace becomes a run and opens its analysis; every bad file gets a message, nothing stored."""

from __future__ import annotations

import gzip
import io
import zipfile

import pytest

from tests.app.conftest import assert_clean, open_page

DATA_TRACE = "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"


def test_good_trace_is_stored_and_analysed(store, shared_traces) -> None:
    at = open_page("upload")
    assert_clean(at)
    assert any("Size limit: 1024 MB" in m.value for m in at.markdown)
    blob = (shared_traces / DATA_TRACE).read_bytes()
    at.file_uploader(key="upload.files").set_value(
        (DATA_TRACE.split("/")[1], blob, "application/gzip")
    ).run()
    assert_clean(at)
    runs = store.list()
    assert len(runs) == 1 and runs[0].kind == "upload"
    assert at.title[0].value == "Analysis"  # a single good upload opens its analysis
    assert [m.label for m in at.metric][:3] == ["Device", "Ranks × steps", "Median step"]


BAD = {
    "empty.json": b"",
    "random.json.gz": bytes(range(256)) * 8,
    "truncated.json.gz": gzip.compress(b'{"traceEvents": [' + b'{"ph": "X"},' * 1000)[:200],
    "array.json": b"[1, 2, 3]",
    "object.json": b"{}",
    "no_events.json": b'{"traceEvents": "nope"}',
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_file_gets_a_message_and_nothing_is_stored(store, name: str) -> None:
    at = open_page("upload")
    at.file_uploader(key="upload.files").set_value(
        (name, BAD[name], "application/octet-stream")
    ).run()
    assert_clean(at)
    assert at.title[0].value == "Upload traces"
    assert len(at.error) == 1 and "not stored" in at.error[0].value
    assert at.error[0].value.count(name) == 1  # named once (was "x — not stored: x: …")
    assert store.list() == []
    assert not [p for p in store.root.iterdir() if p.name.startswith(".tmp-upload-")], (
        "staging is cleaned up"
    )


def test_mixed_batch_and_zip_of_ranks(store, shared_traces) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted((shared_traces / "communication/param_dlrm_8_ranks").iterdir())[:2]:
            z.write(p, p.name)
    at = open_page("upload")
    at.file_uploader(key="upload.files").set_value(
        [
            ("two_ranks.zip", buf.getvalue(), "application/zip"),
            ("bad.json", b"{}", "application/json"),
        ]
    ).run()
    assert_clean(at)
    assert len(at.success) == 1 and len(at.error) == 1
    [run] = store.list()
    assert run.label == "two_ranks.zip"


def test_files_as_ranks_of_one_job(store, shared_traces) -> None:
    files = sorted((shared_traces / "communication/param_dlrm_8_ranks").iterdir())[:2]
    at = open_page("upload")
    at.toggle(key="upload.as_job").set_value(True).run()
    at.text_input(key="upload.job_name").set_value("dlrm 2 ranks").run()
    at.file_uploader(key="upload.files").set_value(
        [(p.name, p.read_bytes(), "application/gzip") for p in files]
    ).run()
    assert_clean(at)
    [run] = store.list()
    assert run.label == "dlrm 2 ranks"
    assert at.title[0].value == "Analysis"
    assert at.metric[1].value.startswith("2 ×")


SNAPSHOT = "memory/cs336_memory_snapshot.pickle"


def test_memory_snapshot_upload_is_analysed_and_judged_against_a_stated_device(
    store, shared_traces
) -> None:
    at = open_page("upload")
    at.file_uploader(key="upload.files").set_value(
        (
            "cs336_memory_snapshot.pickle",
            (shared_traces / SNAPSHOT).read_bytes(),
            "application/octet-stream",
        )
    ).run()
    assert_clean(at)
    [run] = store.list()
    assert at.title[0].value == "Analysis"
    assert [m.label for m in at.metric][:2] == ["Peak live", "Reserved"] and at.metric[
        0
    ].value == "12.97 GiB"
    # no device size yet: the peak is stated and the device asked for, never "Binding bottleneck: memory"
    assert not at.subheader and any(
        "12.97 GiB" in m.value and "device's size" in m.value for m in at.markdown
    )
    sites = at.dataframe[
        0
    ].value  # the Events page's "2.56 GiB in 25 allocation(s)" for the same site
    top = sites[sites["allocated at"] == "model.py:39 forward"].iloc[0]
    assert (top["GiB"], top["allocations"]) == (2.56, 25)
    at = open_page("analysis")  # the stored snapshot, opened again from the Analysis page
    at.number_input(key=f"analysis.device_gib.{run.run_id}").set_value(14.0).run()
    assert at.subheader[0].value == "Binding bottleneck: memory"
    at.number_input(key=f"analysis.device_gib.{run.run_id}").set_value(80.0).run()
    assert_clean(at)
    assert not at.subheader and any("no memory pressure" in m.value for m in at.markdown)
    assert at.metric[2].value == "80 GiB"


class _RunsCode:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_a_pickle_that_carries_code_is_refused_and_nothing_is_stored(store) -> None:
    import pickle

    at = open_page("upload")
    at.file_uploader(key="upload.files").set_value(
        ("evil.pickle", pickle.dumps({"segments": [_RunsCode()]}), "application/octet-stream")
    ).run()
    assert_clean(at)
    assert len(at.error) == 1 and "refused to load builtins.print" in at.error[0].value
    assert store.list() == []


def test_the_runs_list_says_what_analysis_says_of_an_8_rank_zip(store, shared_traces) -> None:
    """Issue 33: an 8-rank .zip listed with ranks 1 (Analysis: 8) and a blank device."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted((shared_traces / "communication/param_dlrm_8_ranks").iterdir()):
            z.write(p, p.name)
    at = open_page("upload")
    at.file_uploader(key="upload.files").set_value(
        [("eight_ranks.zip", buf.getvalue(), "application/zip")]
    ).run()
    assert_clean(at)
    assert at.title[0].value == "Analysis" and at.metric[1].value.startswith("8 ×")
    runs = open_page("runs")
    assert_clean(runs)
    row = runs.dataframe[0].value.iloc[0]
    assert (row["ranks"], row["device"]) == (8, "cuda")


def test_an_empty_zip_is_refused_by_its_own_name_not_a_server_path(store) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w"):
        pass
    at = open_page("upload")
    at.file_uploader(key="upload.files").set_value(
        [("empty.zip", buf.getvalue(), "application/zip")]
    ).run()
    assert_clean(at)
    [error] = at.error
    assert (
        "empty.zip" in error.value
        and str(store.root) not in error.value
        and ".tmp-upload" not in error.value
    )
