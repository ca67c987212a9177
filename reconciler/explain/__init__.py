"""`reconciler explain`: why a Job or Workload is admitted, pending or stalled, in plain words.

state.py        ClusterState: the asked-for object and the live objects around it (plain data)
analyze.py      explain(state) -> Explanation, pure: the core's rules, not re-derived
quota.py        the core's Engine rebuilt from the live objects; quota rows, holders, what must finish
claims.py       DRA: claims, templates, DeviceClasses and how each is charged
pods.py         an admitted workload's pods, claims, PodsReady clock and Warning events
explanation.py  the answer as data; render.py words it (or prints JSON)
fetch.py        the only I/O: reads the objects through reconciler.kube's client, with timeouts
command.py      the command line: fetch, explain, print
"""
