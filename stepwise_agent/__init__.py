"""The agent: the code that runs *inside* the user's training process, in the user's interpreter.

Boot (:mod:`stepwise_agent.boot`), step detection (:mod:`stepwise_agent.steps`) and fix injection
(:mod:`stepwise_agent.inject`). It is loaded by putting a folder that holds this package alone on the script's
``PYTHONPATH``, so nothing is installed into the user's environment; it hands everything back as plain files in
the run folder, where Stepwise's own environment (the analyst) reads them.
"""
