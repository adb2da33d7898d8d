"""Fixtures every test package shares, defined once so that pytest makes one of each per session."""

from tests.llm_server import llm_server_fixture  # noqa: F401 (registers `llm_server`: one server per session)
