"""The small frames the pages and reports draw, computed from a trace or a run's telemetry: a downsampled
category timeline, step spans, a memory series (:mod:`profilers.frames.timeline`) and downsampled telemetry
(:mod:`profilers.frames.telemetry`). Facts, a few hundred rows whatever the input's size; never rendered here."""
