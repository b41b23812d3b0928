"""L2_OPERATOR_NOT_FOUND says where it looked (spec/findings.md, layer 2): every namespace, or the one
GPUBOT_OPERATOR_NAMESPACE names — and then whether the operator runs elsewhere."""

from __future__ import annotations

from layers import runtime
from layers.facts.context import Settings
from tests.layers import builders as b
from tests.layers.builders import one

NODE = "gpu-1"


def _fleet(operator_ns: str | None) -> list[dict[str, object]]:
    pods = [b.pod("ml", "train-0", node=NODE, requests={"nvidia.com/gpu": 1})]
    if operator_ns:
        pods += b.healthy_operator(NODE, ns=operator_ns)
    return [b.gpu_node(NODE, 1), *pods]


def test_unset_setting_looks_everywhere_and_says_install() -> None:
    f = one(runtime.check(b.ctx(_fleet(None), pod=("ml", "train-0"))), "L2_OPERATOR_NOT_FOUND")
    assert f.summary.startswith("no GPU Operator pods in any namespace: install the GPU Operator")


def test_wrong_setting_names_the_namespace_the_operator_runs_in() -> None:
    ctx = b.ctx(
        _fleet("gpu-operator"),
        pod=("ml", "train-0"),
        settings=Settings(operator_namespace="nvidia-gpu-operator"),
    )
    f = one(runtime.check(ctx), "L2_OPERATOR_NOT_FOUND")
    assert "install the GPU Operator" not in f.summary
    assert (
        "namespace nvidia-gpu-operator, the one GPUBOT_OPERATOR_NAMESPACE names, but they run in gpu-operator"
        in f.summary
    )
    assert f.evidence[0].endswith(
        "in namespace nvidia-gpu-operator, the only one GPUBOT_OPERATOR_NAMESPACE=nvidia-gpu-operator lets gpubot read"
    )


def test_setting_with_no_operator_anywhere_says_both() -> None:
    ctx = b.ctx(_fleet(None), pod=("ml", "train-0"), settings=Settings(operator_namespace="gpu-operator"))
    f = one(runtime.check(ctx), "L2_OPERATOR_NOT_FOUND")
    assert (
        "no GPU Operator pods in namespace gpu-operator (GPUBOT_OPERATOR_NAMESPACE) nor in any other: install"
        in f.summary
    )


def test_setting_without_cluster_wide_list_says_the_setting_may_be_wrong() -> None:
    settings = Settings(operator_namespace="nvidia-gpu-operator")
    objects = _fleet("gpu-operator")
    ctx = b.ctx(objects, pod=("ml", "train-0"), settings=settings)
    real = ctx.cluster.list_pods

    def namespaced_only(namespace: str | None = None, **kw: object) -> list[dict[str, object]]:
        if namespace is None and kw.get("label_selector"):
            raise b.forbidden("list", "pods")
        return real(namespace=namespace, **kw)  # type: ignore[arg-type]

    ctx.cluster.list_pods = namespaced_only  # type: ignore[method-assign]
    f = one(runtime.check(ctx), "L2_OPERATOR_NOT_FOUND")
    assert "the other namespaces could not be searched: the setting may be wrong" in f.summary
    assert any(e.startswith("other namespaces not searched:") for e in f.evidence)
