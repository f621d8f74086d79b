"""Real client boto3 >= 1.36 from the pyenv python (2025 CRC checksum defaults, aws-chunked) against objdirect-server (steps in clientsuite.py)."""

import pytest

import drivers
from clientsuite import ClientSuite


class TestBoto3new(ClientSuite):
    NAME = "boto3new"

    def make_driver(self, server, workdir):
        if not drivers.pyenv_present():
            pytest.skip("no pyenv python on this machine: boto3new (pyenv boto3 1.4x) not tested")
        py = drivers.find_pyenv_python()
        assert py, "pyenv python present but none has boto3 >= 1.36"
        return drivers.Boto3Script(server, workdir, py)
