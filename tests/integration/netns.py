"""Several "hosts" on one machine, made from network namespaces (scripts/netns.sh).

    import netns
    with netns.Testbed(3, tag="xh") as tb:          # hosts tb[0], tb[1], tb[2] on 10.201.0.0/24
        srv = tb[0].server(tmp / "data", tmp / "srv.log", ["--fabric", "libfabric:tcp"])
        r = tb[1].run(["objdirect", "ls", "s3://"], env={"AWS_ENDPOINT_URL": srv.endpoint})
        out = tb[1].python("import objd; print(objd.request(HOST, 'GET', '/').status)", HOST=srv.host)

or the pytest fixture `testbed` (tests/integration/conftest.py): testbed(n=2, tag="t") returns a
started Testbed that is torn down after the test, also when it fails.

- Host i is namespace od<pid><tag>-h<i> with eth0 = 10.201.0.<i+1>/24 (Host.addr), lo up and no
  default route; a bridge in a namespace of its own connects them. Nothing is added to the
  caller's namespace (no interface, address or route), so the hosts are not reachable from it:
  run clients inside one (Host.run, Host.popen, Host.python, Host.server).
- Testbed.link(a, b, net) adds a private point-to-point link between two hosts only
  (a gets net.1, b net.2): an address the other hosts cannot route to.
- close() (also on exit of the with block, at interpreter exit, and from the fixture's teardown)
  stops the servers started here, kills what is left in the namespaces and deletes them.
- Needs root; nothing here skips: without it the test fails.
"""

import atexit
import os
import subprocess
import sys

import objd

SCRIPT = os.path.join(objd.REPO, "scripts", "netns.sh")
HERE = os.path.dirname(os.path.abspath(__file__))


def _sh(*args, check=True):
    p = subprocess.run(["bash", SCRIPT, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=60)
    if check and p.returncode != 0:
        raise AssertionError(f"scripts/netns.sh {' '.join(map(str, args))} failed ({p.returncode}):\n"
                             f"{p.stdout.decode(errors='replace')}")
    return p


class Host:
    def __init__(self, testbed, index, addr):
        self.testbed = testbed
        self.index = index
        self.ns = f"{testbed.prefix}-h{index}"
        self.addr = addr  # on eth0, the shared link
        self.links = {}   # other host index -> (our address, interface name) on a private link

    def __repr__(self):
        return f"<Host {self.ns} {self.addr}>"

    def cmd(self, argv):
        """argv run inside this host (ip execs it: the pid is the command's)."""
        return ["ip", "netns", "exec", self.ns, *map(str, argv)]

    def _env(self, env):
        return dict(os.environ, **{k: str(v) for k, v in (env or {}).items()})

    def popen(self, argv, env=None, **kw):
        return subprocess.Popen(self.cmd(argv), env=self._env(env), **kw)

    def run(self, argv, env=None, timeout=300, check=False, **kw):
        """subprocess.run in this host; stdout and stderr captured (text) unless given."""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        p = subprocess.run(self.cmd(argv), env=self._env(env), timeout=timeout, **kw)
        if check and p.returncode != 0:
            raise AssertionError(f"{argv} in {self.ns} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
        return p

    def python(self, code, env=None, timeout=300, check=True, **variables):
        """Runs python3 -c code in this host with tests/integration (objd, ...) importable; each
        keyword becomes a global variable (its repr); returns the CompletedProcess (text)."""
        prelude = "".join(f"{k} = {v!r}\n" for k, v in variables.items())
        env = dict(env or {})
        env["PYTHONPATH"] = HERE + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return self.run([sys.executable, "-c", prelude + code], env=env, timeout=timeout, check=check,
                        universal_newlines=True)

    def server(self, data_dir, log_path, extra_args=(), listen_host=None, env=None, start=True):
        """The real objdirect-server in this host, listening on listen_host (default: this host's
        address; "0.0.0.0" for every interface) port 0; clients reach it at Host.addr."""
        listen = listen_host or self.addr
        srv = objd.Server(str(data_dir), str(log_path), extra_args, listen_host=listen, netns=self.ns,
                          connect_host=self.addr if listen == "0.0.0.0" else listen, env=env)
        self.testbed.servers.append(srv)
        return srv.start() if start else srv


class Testbed:
    def __init__(self, n=2, tag="t", net="10.201.0"):
        assert 1 <= n <= 8, n
        self.prefix = f"od{os.getpid()}{tag}"
        self.net = net
        self.n = n
        self.hosts = [Host(self, i, f"{net}.{i + 1}") for i in range(n)]
        self.servers = []
        self._up = False

    def __getitem__(self, i):
        return self.hosts[i]

    def __len__(self):
        return self.n

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
        return False

    def start(self):
        _sh("down", self.prefix, check=False)  # a previous run of this pid and tag
        _sh("up", self.prefix, self.n, self.net)
        self._up = True
        atexit.register(self.close)
        return self

    def link(self, a, b, net):
        """Private link between hosts a and b: a gets net.1 on interface p<b>, b net.2 on p<a>."""
        _sh("link", self.prefix, a, b, net)
        self.hosts[a].links[b] = (f"{net}.1", f"p{b}")
        self.hosts[b].links[a] = (f"{net}.2", f"p{a}")
        return self.hosts[a].links[b][0], self.hosts[b].links[a][0]

    def namespaces(self):
        out = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, universal_newlines=True).stdout
        return sorted(l.split()[0] for l in out.splitlines() if l.startswith(self.prefix + "-"))

    def close(self):
        """Stops the servers (SIGTERM, then SIGKILL), then removes the namespaces. Idempotent.
        Returns the servers' exit codes."""
        codes = []
        for srv in self.servers:
            try:
                codes.append(srv.stop())
            except AssertionError:
                codes.append("killed")
        self.servers.clear()
        if self._up:
            _sh("down", self.prefix, check=False)
            self._up = False
        return codes
