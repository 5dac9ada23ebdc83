"""Events page: a trace's window zooms and re-buckets, a small window lists its events, exports are offered;
a memory snapshot shows memory over time and the stacks of its top allocation sites."""

from __future__ import annotations

from app import state
from tests.app.conftest import assert_clean, open_page

DATA_TRACE = "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"
SNAPSHOT = "memory/cs336_memory_snapshot.pickle"


def test_trace_window_zooms_to_single_events(store, shared_traces) -> None:
    store.import_trace(shared_traces / DATA_TRACE)
    at = open_page("events")
    assert_clean(at)
    start, end = at.number_input(key=state.EVENTS_START), at.number_input(key=state.EVENTS_END)
    span = end.value
    assert start.value == 0.0 and span > 100
    assert len(at.get("plotly_chart")) == 1  # the whole trace: too many events to draw one by one
    assert any("zoom in to at most" in i.value for i in at.info)
    buttons = [b.label for b in at.get("download_button")]
    assert any("whole trace" in b for b in buttons) and any("this window" in b for b in buttons)
    start.set_value(20.0)
    end.set_value(20.5).run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 2  # the window chart and its events, one bar each
    assert not at.info
    at.button[1].click().run()  # Whole trace
    assert at.number_input(key=state.EVENTS_START).value == 0.0
    assert at.number_input(key=state.EVENTS_END).value == span


def test_snapshot_memory_over_time_and_stacks(store, shared_traces) -> None:
    store.import_trace(shared_traces / SNAPSHOT)
    at = open_page("events")
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1
    assert any("Peak allocated: 12.97 GiB" in m.value for m in at.markdown)
    assert (
        len(at.main.expander) == 5
        and "2.56 GiB in 25 allocation(s) — model.py:39 forward" == at.main.expander[0].label
    )


def test_open_in_perfetto_hands_over_the_window_only_on_click(store, shared_traces) -> None:
    """The page embeds the window's file and opens ui.perfetto.dev only from the button's click handler: no
    outside address is loaded by the page itself."""
    import base64
    import gzip
    import json
    import re

    from app.widgets.perfetto_open import PERFETTO_UI, snippet

    store.import_trace(shared_traces / DATA_TRACE)
    at = open_page("events")
    at.number_input(key=state.EVENTS_START).set_value(20.0)
    at.number_input(key=state.EVENTS_END).set_value(20.5).run()
    at.button(key="events.perfetto_prepare").click().run()
    assert_clean(at)
    [frame] = at.get("iframe")
    page = frame.proto.srcdoc
    assert "Open in Perfetto" in page and page.count(PERFETTO_UI) == 1
    assert "onclick = () =>" in page and page.index("window.open(origin)") > page.index("onclick")
    assert not re.search(r"<(?:script|link|img)[^>]+(?:src|href)=", page)  # nothing fetched on load
    data = re.search(r'const b64 = "([^"]+)"', page)
    assert data is not None
    doc = json.loads(gzip.decompress(base64.b64decode(data.group(1))))
    assert doc["otherData"]["window_ns"] is not None and doc["traceEvents"]
    assert snippet(b"x", "a</script>b").count("</script>") == 1  # a label cannot close the script


def test_a_link_with_a_reversed_window_says_what_it_shows(store, shared_traces) -> None:
    """``/events?from=5000&to=100`` silently became another window (issue 33): the page now says so."""
    store.import_trace(shared_traces / DATA_TRACE)
    at = open_page(None)
    at.query_params["from"] = "5000"
    at.query_params["to"] = "100"
    at.switch_page("views/events.py").run()
    assert_clean(at)
    said = [i.value for i in at.info if "The link's window 5000–100 ms" in i.value]
    assert said and "reversed" in said[0]
    start, end = (
        at.number_input(key=state.EVENTS_START).value,
        at.number_input(key=state.EVENTS_END).value,
    )
    assert f"showing {start:,.3f}–{end:,.3f} ms" in said[0]
