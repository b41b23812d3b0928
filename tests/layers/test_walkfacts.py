"""Layers 4 and 5 with nothing to examine say so: never an OK for nodes nobody looked at."""

from layers import card, memory
from layers.findings import Severity
from tests.layers import builders as b


def test_a_pending_pod_in_a_cluster_without_gpu_nodes_is_unknown_not_ok() -> None:
    objs = [
        b.node("cpu-1"),
        b.pod("ml", "job-0", phase="Pending", requests={"nvidia.com/gpu": 1}),
    ]
    for check, code in ((memory.check, "L4_UNKNOWN"), (card.check, "L5_UNKNOWN")):
        result = check(b.ctx(objs, pod=("ml", "job-0")))
        assert result.status == Severity.UNKNOWN
        assert [f.code for f in result.findings] == [code]
        assert "no GPU node to examine" in result.findings[0].summary
