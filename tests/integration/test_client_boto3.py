"""Real client Debian boto3 1.26 (/usr/bin/python3) against objdirect-server (steps in clientsuite.py)."""

import drivers
from clientsuite import ClientSuite


class TestBoto3(ClientSuite):
    NAME = "boto3"

    def make_driver(self, server, workdir):
        return drivers.Boto3Script(server, workdir, "/usr/bin/python3")
