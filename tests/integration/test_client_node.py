"""Real client @aws-sdk/client-s3 (JavaScript SDK v3, node) against objdirect-server (steps in clientsuite.py)."""

import drivers
from clientsuite import ClientSuite


class TestNode(ClientSuite):
    NAME = "node"

    def make_driver(self, server, workdir):
        return drivers.Node(server, workdir)
