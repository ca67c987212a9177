"""API requests per admitted Job, by verb and resource, per client, from the test-bed's audit log.

The kube-apiserver's own ``apiserver_request_total`` counts requests by verb, group, version,
resource, subresource, scope, component, code and dry_run: it has no client label (checked on
v1.36 by ``request_total_labels``), so two clients' requests cannot be told apart from it. The
bench therefore starts the API server with an audit log at level Metadata (one JSON line per
request, written when the response completes, with the request's verb, resource, userAgent and
received time) and counts, per phase, the lines of the client under test: the manager's
(``dra-quota-reconciler``, ``kueue/v0.18.1 ...``) from the first Job POST to its stop, the bare
client's in the ceiling phase. A watch is counted once, when it ends.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

from e2e.testbed import KubeClient

__all__ = [
    "add_up",
    "agent_of",
    "audit_args",
    "audit_log",
    "count_requests",
    "request_table",
    "request_total_labels",
]

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
"""


def audit_args(folder: Path) -> tuple[str, ...]:
    """kube-apiserver flags for a Metadata audit log of every request, written in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    policy = folder / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    return (
        f"--audit-policy-file={policy}",
        f"--audit-log-path={folder / 'audit.log'}",
        "--audit-log-format=json",
        "--audit-log-maxsize=0",  # one file, never rotated during a run
    )


def audit_log(folder: Path) -> Path:
    return folder / "audit.log"


def agent_of(user_agent: str) -> str:
    """The client's name: the User-Agent's first word up to its version (``kueue``, ``kube-scheduler``)."""
    return re.split(r"[/ ]", user_agent.strip(), maxsplit=1)[0] if user_agent.strip() else "-"


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _entries(path: Path) -> Iterator[dict[str, object]]:
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short when the server stopped
            if isinstance(entry, dict):
                yield entry


def request_key(entry: dict[str, object]) -> str:
    """``verb resource[/subresource]`` of an audit entry (the path for non-resource requests)."""
    ref = entry.get("objectRef")
    verb = str(entry.get("verb", "?"))
    if not isinstance(ref, dict) or not ref.get("resource"):
        return f"{verb} {entry.get('requestURI', '?')}".split("?")[0]
    resource = str(ref["resource"])
    if ref.get("subresource"):
        resource += f"/{ref['subresource']}"
    return f"{verb} {resource}"


def count_requests(path: Path, agent: str, since: float = 0.0, until: float = float("inf")) -> Counter[str]:
    """Requests of the client ``agent`` received in [since, until] (time.time()), by verb and resource."""
    counts: Counter[str] = Counter()
    if not path.exists():
        return counts
    for entry in _entries(path):
        if agent_of(str(entry.get("userAgent", ""))) != agent:
            continue
        received = entry.get("requestReceivedTimestamp")
        if isinstance(received, str) and since <= _epoch(received) <= until:
            counts[request_key(entry)] += 1
    return counts


def request_table(columns: dict[str, tuple[Counter[str], int]]) -> list[str]:
    """Requests per admitted Job by verb and resource, one column per client: name -> (counts, Jobs)."""
    names = list(columns)
    keys = sorted({k for counts, _ in columns.values() for k in counts}, key=_row_order)
    width = max([len("verb resource"), *(len(k) for k in keys)])
    cells = [max(12, len(n)) for n in names]
    head = "  ".join(f"{n:>{w}}" for n, w in zip(names, cells, strict=True))
    lines = [f"  {'verb resource':<{width}}  {head}"]
    for key in keys:
        row = "  ".join(
            f"{columns[n][0][key] / max(1, columns[n][1]):>{w}.2f}" for n, w in zip(names, cells, strict=True)
        )
        lines.append(f"  {key:<{width}}  {row}")
    totals = "  ".join(
        f"{sum(columns[n][0].values()) / max(1, columns[n][1]):>{w}.2f}"
        for n, w in zip(names, cells, strict=True)
    )
    lines.append(f"  {'all':<{width}}  {totals}")
    return lines


def _row_order(key: str) -> tuple[int, str]:
    verb, _, resource = key.partition(" ")
    reads = verb in ("get", "list", "watch")
    return (1 if reads else 0, f"{resource} {verb}")


def add_up(counts: Iterable[Counter[str]]) -> Counter[str]:
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    return total


async def request_total_labels(kube: KubeClient) -> list[str]:
    """The label names of the API server's ``apiserver_request_total`` (its /metrics)."""
    text = str((await kube.get("/metrics")).get("raw", ""))
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{"):
            labels = line[line.index("{") + 1 : line.rindex("}")]
            return sorted(re.findall(r'(\w+)="', labels))
    return []
