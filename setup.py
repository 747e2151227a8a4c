"""The one part of the build pyproject.toml cannot declare without an experimental table: the C
core of the fast E2 reader (kpm/_fast_message.c). Optional: where no compiler is, the install
goes on and kpm.fast_message reads with its pure-Python twin. The build carries its source's
SHA-256, so that a build older than its source (a source that no longer compiles leaves the
last build in place) is told apart (tests/test_fast_message_core.py)."""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "kpm/_fast_message.c"
DIGEST = hashlib.sha256((Path(__file__).resolve().parent / SOURCE).read_bytes()).hexdigest()

setup(
    ext_modules=[
        Extension(
            "kpm._fast_message",
            [SOURCE],
            define_macros=[("SOURCE_SHA256", f'"{DIGEST}"')],
            optional=True,
        )
    ]
)
