"""`compute.bf16: auto`: bf16 autocast only on a CPU whose native bf16 kernels torch and oneDNN may use; the slow
kind's kernels (`ATEN_CPU_CAPABILITY=avx2`, `ONEDNN_MAX_CPU_ISA=AVX2`) make it emulated, hence off; never on a GPU,
where it measured slower for this project's models; true/false force it. Each case runs in a fresh interpreter:
torch reads `ATEN_CPU_CAPABILITY` once, at import."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = ("import torch; from learned_attribution.core.models.runner import cpu_kernels, resolve_bf16; "
         "print(resolve_bf16('auto', torch.device('cpu')), resolve_bf16('auto', torch.device('cuda')), "
         "resolve_bf16(True, torch.device('cuda')), resolve_bf16(False, torch.device('cpu')), '|', cpu_kernels())")


def _probe(**environment: str) -> tuple[list[str], str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")}
    output = subprocess.run([sys.executable, "-c", PROBE], env={**env, **environment}, capture_output=True, text=True,
                            check=True).stdout.strip()
    choices, kernels = output.split(" | ")
    return choices.split(), kernels


def _native_bf16_cpu() -> bool:
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    return "avx512_bf16" in flags or "amx_bf16" in flags


def test_auto_is_off_on_a_gpu_and_forced_values_win():
    choices, _ = _probe()
    assert choices[1:] == ["False", "True", "False"]
    assert choices[0] == str(_native_bf16_cpu())


def test_the_slow_kinds_kernels_turn_auto_off_and_are_named():
    choices, kernels = _probe(ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2")
    assert choices[0] == "False"
    assert kernels == "torch CPU capability AVX2, oneDNN ISA AVX2"


@pytest.mark.skipif(not _native_bf16_cpu(), reason="this CPU has no native bf16")
def test_a_capped_onednn_alone_turns_auto_off():
    assert _probe(ONEDNN_MAX_CPU_ISA="AVX2")[0][0] == "False"
    assert _probe(ONEDNN_MAX_CPU_ISA="AVX512_CORE_AMX")[0][0] == "True"
