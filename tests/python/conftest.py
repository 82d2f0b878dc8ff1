"""pytest setup for the Python package's tests: `kiln` imports from the build
tree (PYTHONPATH=build/python, set by ctest), the kiln command comes from
--kiln, and a small generated model is made once per session."""
import os
import subprocess

import pytest


def pytest_addoption(parser):
    parser.addoption("--kiln", required=True, help="the kiln command of the same build")


@pytest.fixture(scope="session")
def kiln_cmd(request):
    return request.config.getoption("--kiln")


@pytest.fixture(scope="session")
def tiny_model(kiln_cmd, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("model") / "tiny.gguf")
    subprocess.run([kiln_cmd, "gen-model", "--arch", "llama", "--preset", "tiny", "--type", "q8_0", "--seed", "5",
                    "-o", path], check=True, capture_output=True)
    return path
