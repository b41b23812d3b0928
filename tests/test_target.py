import pytest

from layers.facts.target import BadTarget, parse_pod_ref


@pytest.mark.parametrize(
    ("ref", "ns", "expected"),
    [
        ("trainer-0", None, ("default", "trainer-0")),
        ("ml/trainer-0", None, ("ml", "trainer-0")),
        ("trainer-0", "ml", ("ml", "trainer-0")),
        ("ml/trainer-0", "ml", ("ml", "trainer-0")),
        (
            "vllm-medgemma-4b-it-d599b4c99-f95nk",
            "vllm-inference",
            ("vllm-inference", "vllm-medgemma-4b-it-d599b4c99-f95nk"),
        ),
        ("web.v2-0", None, ("default", "web.v2-0")),
    ],
)
def test_valid_references(ref: str, ns: str | None, expected: tuple[str, str]) -> None:
    assert parse_pod_ref(ref, ns) == expected


@pytest.mark.parametrize(
    "ref",
    [
        "",
        "   ",
        "Trainer-0",
        "ml/",
        "/pod",
        "a/b/c",
        "pod_name",
        "-pod",
        "pod-",
        "ml/pod;rm -rf",
        "x" * 254,
        "ns" * 40 + "/pod",
    ],
)
def test_malformed_references_are_refused(ref: str) -> None:
    with pytest.raises(BadTarget) as err:
        parse_pod_ref(ref)
    assert "\n" not in str(err.value)


def test_conflicting_namespaces() -> None:
    with pytest.raises(BadTarget, match="namespace given twice"):
        parse_pod_ref("ml/trainer-0", "prod")
