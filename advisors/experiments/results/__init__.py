"""What an experiment found, decided once: its record (:mod:`.record`, built by
:mod:`.recording`), the verdict as data and its words (:mod:`.outcome`; old records' text is read
back by :mod:`.words`), the charts' inputs (:mod:`.evidence`), the stored view every page reads
(:mod:`.stored_view`) and the ``optimize --json``/text rendering of a ladder
(:mod:`.ladder_report`)."""
