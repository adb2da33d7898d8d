# Metadata lives in pyproject.toml. This shim exists for Apache Beam's `--setup_file ./setup.py`,
# which stages the project for Dataflow/Flink workers by running `python setup.py sdist`.
from setuptools import setup

setup()
