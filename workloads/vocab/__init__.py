"""The vocabulary: the names every other room of cmx speaks in, written once each.

Pools and their traits (:mod:`.pools`), servers (:mod:`.services`), who a client is and what it
talks to (:mod:`.clients`), and metric names (:mod:`.metrics`). The registries that give those
names their meaning read them from here: the dimensions (workloads/vocab/dimensions.py), the broker and
backend kinds (workloads/vocab/kinds.py), the servers (workloads/servers/), the controller's metric
registry (engine/results/metricdefs.py). It imports nothing of cmx and only the standard library:
it is the bottom room of ``workloads/`` (tests/unit/test_layout.py) and ships to every host.
"""
