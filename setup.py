"""The one part of the build pyproject.toml cannot declare without an experimental table: the C
core of the fast E2 reader (kpm/_fast_message.c). Optional: where no compiler is, the install
goes on and kpm.fast_message reads with its pure-Python twin."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("kpm._fast_message", ["kpm/_fast_message.c"], optional=True)])
