"""Many ranks as map and reduce: a rank file → its summary (:mod:`.rank_summary`, with :mod:`.collectives`), on
the local cores or Ray (:mod:`.engines`), reduced to the job's breakdown and cross-rank views (:mod:`.reduce`);
and the summaries the agent writes at capture time (:mod:`.agent_summaries`)."""
