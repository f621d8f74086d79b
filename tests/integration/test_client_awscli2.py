"""Real client Debian awscli 2.9 (/usr/bin/aws) against objdirect-server (steps in clientsuite.py)."""

import drivers
from clientsuite import ClientSuite


class TestAwscli2(ClientSuite):
    NAME = "awscli2"

    def make_driver(self, server, workdir):
        return drivers.AwsCli(server, workdir, "/usr/bin/aws")
