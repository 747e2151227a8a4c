"""Every variant of the policy's C core gives the same weights, scores and bounds.

The installed core carries three builds of its loops (AVX-512, AVX2 and the x86-64 baseline)
and the loader runs the widest this CPU has: the rest of the suite only ever tests that one.
Here each is compiled on its own (WIDE_VECTORS defined empty, the instruction set chosen with
-m flags) and run on the same generated beliefs as the installed core; the variants this CPU
cannot run are left out. Needs the C compiler the install builds the core with.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from core.domain import normal_quantile
from xapp.policy import compiled, robust

SOURCE = Path(compiled.__file__).with_name("_robust_core.c")
FLAGS = {
    "baseline": ["-march=x86-64"],
    "avx2": ["-march=x86-64", "-mavx2"],
    "avx512f": ["-march=x86-64", "-mavx512f"],
}


def _cpu_has(flag: str) -> bool:
    if flag == "baseline":
        return True
    try:
        return flag in Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False


def build(variant: str, into: Path) -> ModuleType:
    compiler = sysconfig.get_config_var("CC") or "cc"
    target = into / f"{variant}" / "_robust_core.so"
    target.parent.mkdir()
    subprocess.run(
        [
            *compiler.split(),
            "-shared",
            "-fPIC",
            "-O3",
            "-ffp-contract=off",  # as setup.py builds it
            "-fno-trapping-math",
            *FLAGS[variant],
            "-DWIDE_VECTORS=",
            '-DSOURCE_SHA256="variant"',
            f"-I{sysconfig.get_paths()['include']}",
            str(SOURCE),
            "-o",
            str(target),
        ],
        check=True,
        capture_output=True,
    )
    spec = importlib.util.spec_from_file_location("_robust_core", target)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


needs = pytest.mark.skipif(
    sys.platform != "linux"
    or not sysconfig.get_platform().endswith("x86_64")
    or shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) is None
    or not compiled.COMPILED,
    reason="needs Linux on x86-64, the installed core and its C compiler",
)


def beliefs(rng: np.random.Generator, rows: int, paths: int) -> list[np.ndarray]:
    corners = np.array([0.0, 1e-300, 5e-324, 1e300, 12.1, 342.0, 1190.0])
    means = np.where(
        rng.random((rows, paths)) < 0.15,
        rng.choice(corners, (rows, paths)),
        rng.uniform(0, 2000, (rows, paths)),
    )
    means = np.where(means >= 1e300, 1e6, means)  # finite sums: what _sane lets through
    stddevs = means * rng.uniform(0, 1, (rows, paths)) * rng.choice([0.0, 0.1, 1.0], (rows, 1))
    risks = rng.choice([0.0, 0.0, 0.01, 0.3, 1.0], (rows, paths))
    stalls = rng.choice([0.0, 0.3, 0.6], rows)
    return [np.ascontiguousarray(a, dtype=np.float64) for a in (means, stddevs, risks, stalls)]


@needs
@pytest.mark.parametrize("variant", list(FLAGS))
def test_each_variant_of_the_core_decides_as_the_installed_one(
    variant: str, tmp_path: Path
) -> None:
    if not _cpu_has(variant):
        pytest.skip(f"this CPU has no {variant}")
    built = build(variant, tmp_path)
    rng = np.random.default_rng(len(variant))
    quantile = 0.1
    for paths in range(1, 6):
        for max_weight in (1, 7, 100, 255):
            means, stddevs, risks, stalls = beliefs(rng, 64, paths)
            normal = robust._standard_normal_draws(paths)
            args = (
                robust.DRAWS,
                max_weight,
                normal_quantile(quantile),
                robust._rank(robust.DRAWS, quantile),
                robust.CANDIDATE_DRAWS,
            )
            outs = []
            for core in (compiled.core, built):
                out = np.empty((64, paths), dtype=np.int64)
                core.robust(means, stddevs, risks, stalls, normal, out, 64, paths, *args)
                optimal = np.empty((64, paths), dtype=np.int64)
                core.optimal(means, optimal, 64, paths, max_weight)
                weights = np.ascontiguousarray(out[:, None, :], dtype=np.float64)
                scores = np.empty((64, 1))
                core.scores(
                    weights, means, stddevs, risks, stalls, normal, scores, 64, 1, paths,
                    robust.DRAWS, robust._rank(robust.DRAWS, quantile),
                )  # fmt: skip
                bound, scale = np.zeros(64), np.zeros(64)
                if paths <= robust.FRONTIER_PATHS:
                    rank = robust._rank(robust.DRAWS, quantile)
                    frontier = robust._frontier(paths, rank)
                    levels, highest = robust._frontier_levels(paths, rank)
                    core.frontier(
                        means, stddevs, risks, stalls, levels, highest, frontier, bound, scale,
                        64, paths, rank + 1, frontier.shape[1],
                    )  # fmt: skip
                outs.append((out, optimal, scores, bound, scale))
            for installed, alone in zip(*outs, strict=True):
                np.testing.assert_array_equal(installed, alone)
