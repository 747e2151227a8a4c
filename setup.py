"""The one part of the build pyproject.toml cannot declare without an experimental table: the C
cores of the fast E2 reader (kpm/_fast_message.c), of the robust policy
(xapp/policy/_robust_core.c), of the KPI samples to and from columns (xapp/_samples.c),
of the silence tracker's walk (xapp/estimators/_silence.c), of fusion
(xapp/estimators/_fusion_core.c) and of the capacity models' tree ensembles
(models/_tree_core.c, whose twin is onnxruntime itself).
Optional: where no compiler is, the install goes on and each
module computes with its pure-Python (numpy) twin. Each build carries its source's
SHA-256, so that a build older than its source (a source that no longer compiles leaves the
last build in place) is told apart (tests/test_fast_message_core.py)."""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent


def _compiled(name: str, source: str, *, exact_floats: bool = False) -> Extension:
    digest = hashlib.sha256((HERE / source).read_bytes()).hexdigest()
    return Extension(
        name,
        [source],
        define_macros=[("SOURCE_SHA256", f'"{digest}"')],
        # The policy's and fusion's cores must round as numpy does: no fused multiply-adds.
        extra_compile_args=["-ffp-contract=off", "-fno-trapping-math"] if exact_floats else [],
        optional=True,
    )


setup(
    ext_modules=[
        _compiled("kpm._fast_message", "kpm/_fast_message.c"),
        _compiled("xapp.policy._robust_core", "xapp/policy/_robust_core.c", exact_floats=True),
        _compiled("xapp._samples", "xapp/_samples.c"),
        _compiled("xapp.estimators._silence", "xapp/estimators/_silence.c"),
        _compiled(
            "xapp.estimators._fusion_core", "xapp/estimators/_fusion_core.c", exact_floats=True
        ),
        _compiled("models._tree_core", "models/_tree_core.c", exact_floats=True),
    ]
)
