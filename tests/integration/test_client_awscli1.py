"""Real client awscli 1.x from the pyenv python against objdirect-server (steps in clientsuite.py)."""

import pytest

import drivers
from clientsuite import ClientSuite


class TestAwscli1(ClientSuite):
    NAME = "awscli1"

    def make_driver(self, server, workdir):
        if not drivers.pyenv_present():
            pytest.skip("no pyenv python on this machine: awscli1 (pyenv awscli 1.x) not tested")
        aws = drivers.find_awscli1()
        assert aws, "pyenv python present but no awscli 1.x found (~/.pyenv/versions/*/bin/aws)"
        return drivers.AwsCli(server, workdir, aws)
