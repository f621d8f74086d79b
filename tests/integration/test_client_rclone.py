"""Real client rclone (Debian 1.60) against objdirect-server (steps in clientsuite.py)."""

import drivers
from clientsuite import ClientSuite


class TestRclone(ClientSuite):
    NAME = "rclone"

    def make_driver(self, server, workdir):
        return drivers.Rclone(server, workdir)
