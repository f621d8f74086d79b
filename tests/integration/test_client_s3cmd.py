"""Real client s3cmd (Debian 2.3) against objdirect-server (steps in clientsuite.py)."""

import drivers
from clientsuite import ClientSuite


class TestS3cmd(ClientSuite):
    NAME = "s3cmd"

    def make_driver(self, server, workdir):
        return drivers.S3cmd(server, workdir)
