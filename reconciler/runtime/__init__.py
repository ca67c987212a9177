"""The single writer, in rooms by what they do: `loop` (the process, the controller, the inbox
and the reconciler that owns all state), `workloads` (the Workload concern: verdicts, requeue,
orphans, PodsReady, preemption and eviction), `jobs` (the job concern: each enabled kind's jobs
started, stopped and finished through their Workloads), `queues` (ClusterQueue and LocalQueue
status, in-use finalizers, the device inventory, the Configuration's reload) and `shared` (what
they all use: the context, the store, writes, Events, timers, the table of watched kinds).
"""
