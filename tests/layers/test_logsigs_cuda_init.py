"""CUDA that cannot initialise, as applications other than PyTorch print it (probe7): llama.cpp/ggml,
Ollama's driver probe, TensorRT's builder. Each is the application finding no usable GPU
(spec L2_APP_SEES_NO_GPU); their out-of-memory error code (2) is not."""

from __future__ import annotations

import pytest

from layers.facts.logsigs import APP_SEES_NO_GPU

SEEN = [
    "ggml_cuda_init: failed to initialize CUDA: unknown error",  # llama.cpp issue 7218 (no nvidia_uvm)
    'level=WARN source=gpu.go:562 msg="unknown error initializing cuda driver library" '
    'library=/usr/lib/x86_64-linux-gnu/libcuda.so.560.35.03 error="cuda driver library init failure: 999"',
    "[01/08/2024-17:06:37] [TRT] [W] CUDA initialization failure with error: 35. Please check your CUDA "
    "installation:  http://docs.nvidia.com/cuda/cuda-installation-guide-linux/index.html",
]
NOT_SEEN = [
    "[TRT] [E] createInferRuntime: CUDA initialization failure with error: 2",  # out of memory
    'msg="Unable to load cudart library /usr/lib/libcuda.so: cuda driver library init failure: 2"',
    "ggml_cuda_init: found 4 CUDA devices:",
    "llama_model_load: failed to initialize CUDAGraph capture, falling back",
]


@pytest.mark.parametrize("line", SEEN)
def test_cuda_init_failures_are_no_usable_gpu(line: str) -> None:
    assert APP_SEES_NO_GPU.matches(line)


@pytest.mark.parametrize("line", NOT_SEEN)
def test_out_of_memory_and_healthy_init_are_not(line: str) -> None:
    assert not APP_SEES_NO_GPU.matches(line)
