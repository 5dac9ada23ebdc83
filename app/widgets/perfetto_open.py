"""An "Open in Perfetto" button: the Perfetto UI accepts a trace posted with ``window.postMessage`` from the page
that opened it (https://perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui).

The page itself makes no outside request: the trace is embedded in a small HTML snippet (base64) and nothing
leaves this machine until the user clicks the button, which opens ui.perfetto.dev in a new tab, waits for its
``PONG`` and posts the bytes (the Perfetto UI runs in the browser: the trace goes to that tab, not to a server).
Only a window small enough to embed is offered this way; the download buttons stay for any size.
"""

from __future__ import annotations

import base64
import html
import json

import streamlit.components.v1 as components

PERFETTO_UI = "https://ui.perfetto.dev"
#: Largest gzip'd trace embedded in the page for the button (bigger ones: download and open the file).
MAX_EMBED_BYTES = 12 * 1024**2

_SCRIPT = """
<button id="open" style="font: 14px sans-serif; padding: 6px 14px; cursor: pointer;">Open in Perfetto ↗</button>
<span id="say" style="font: 13px sans-serif; margin-left: 8px; color: #555;"></span>
<script>
const b64 = "__DATA__";
const title = __TITLE__;
const origin = "__ORIGIN__";
document.getElementById("open").onclick = () => {
  const say = document.getElementById("say");
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const win = window.open(origin);
  if (!win) { say.textContent = "The browser blocked the new tab: allow pop-ups for this page."; return; }
  say.textContent = "Waiting for Perfetto…";
  const timer = setInterval(() => win.postMessage("PING", origin), 50);
  const onMessage = (evt) => {
    if (evt.source !== win || evt.data !== "PONG") return;
    clearInterval(timer);
    window.removeEventListener("message", onMessage);
    win.postMessage({perfetto: {buffer: bytes.buffer, title: title, fileName: title + ".json.gz"}}, origin);
    say.textContent = "Sent to the Perfetto tab.";
  };
  window.addEventListener("message", onMessage);
};
</script>
"""


def snippet(gz: bytes, title: str) -> str:
    """The button's HTML: the gzip'd trace inline, the Perfetto origin only in the click handler."""
    return (
        _SCRIPT.replace("__DATA__", base64.b64encode(gz).decode())
        .replace("__TITLE__", json.dumps(html.escape(title)))
        .replace("__ORIGIN__", PERFETTO_UI)
    )


def open_button(gz: bytes, title: str) -> None:
    """Render the button (the caller checks :data:`MAX_EMBED_BYTES` and says why when it is over)."""
    components.html(snippet(gz, title), height=48)
