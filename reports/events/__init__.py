"""The event-level view: any window of a trace re-bucketed on the server (:mod:`.window`), its charts
(:mod:`.charts`) and the Perfetto export of the trace or a window (:mod:`.perfetto`)."""
