"""Topology-aware scheduling (Kueue's TAS) as pure logic: the pod-set topology requests read from
their annotations, the topology's domains built from Nodes with their free capacity, the
placement of a pod set in those domains, and the assignment as a Workload's admission records it.
"""
