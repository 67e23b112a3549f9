"""An emulated cluster on one machine: network namespaces, bridges, HTB links, CPU quotas.

Layout (``rid`` = short random run id, so concurrent runs never collide)::

    ns ddlp-<rid>            core switch: bridge br0, ports port<i> of hosts outside racks
                             (shape host downlinks), rack<r> (shape rack r's downlink)
    ns ddlp-<rid>-rack-<r>   rack switch r: bridge br0, ports port<i> of its hosts, uplink
                             (shapes the rack's uplink to the core switch)
    ns ddlp-<rid>-<host>     host: eth0 (198.18.0.x/24, shapes the host uplink), lo (shaped
                             per rank for a server of several ranks: its intra-node fabric)
    /sys/fs/cgroup/cpu/ddlperf-<rid>/<host>    optional CPU quota
    /run/ddlperf/<rid>.json  state: lets `ddlperf cluster down` (or a later process) clean up

A host is a server: every rank on it shares its eth0 (the server's NIC) and reaches the other
ranks of the server over ``lo``, which :func:`~ddlperf.measure.shaping.shape_loopback` shapes
to ``intra_bps`` per rank once the ranks have connected (:meth:`EmulatedCluster.
classify_ranks`, which also gives each pair of ranks on different hosts a fair class on the
links between them). Racks are a second level of switches behind shaped uplinks.

Used as a context manager the cluster is always torn down: on exit, on exceptions and on
SIGINT/SIGTERM. :meth:`EmulatedCluster.up` leaves it running (``keep=True``) for the CLI.
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import json
import math
import os
import re
import secrets
import signal
import subprocess
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import Any

from ddlperf.errors import InputError
from ddlperf.measure import cgroups, netns, shaping
from ddlperf.measure.counters import RACK_UPLINK
from ddlperf.measure.hosts import MAX_HOSTS as MAX_HOSTS  # re-exported: the CLI's limit
from ddlperf.measure.hosts import HostSpec, RackSpec, reach, validate_hosts
from ddlperf.measure.netns import CommandError

NS_PREFIX = "ddlp-"
CGROUP_PREFIX = "ddlperf-"
STATE_DIR = Path("/run/ddlperf")
SUBNET = ipaddress.ip_network("198.18.0.0/24")  # inside the benchmarking range 198.18.0.0/15
BRIDGE = "br0"
HOST_DEV = "eth0"

_RUN_ID = re.compile(r"^[a-z0-9]{1,12}$")
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def new_run_id() -> str:
    """A short random id that no live cluster uses."""
    while True:
        rid = secrets.token_hex(3)
        if not run_id_in_use(rid):
            return rid


def run_id_in_use(rid: str) -> bool:
    return (
        (STATE_DIR / f"{rid}.json").exists()
        or any(run_id_of_netns(ns) == rid for ns in netns.list_netns())
        or (cgroups.CPU_ROOT / f"{CGROUP_PREFIX}{rid}").exists()
    )


def run_id_of_netns(name: str) -> str | None:
    """Run id encoded in a ddlperf namespace name, or None for foreign namespaces."""
    if not name.startswith(NS_PREFIX):
        return None
    rid = name[len(NS_PREFIX) :].split("-", 1)[0]
    return rid if _RUN_ID.match(rid) else None


def require_root() -> None:
    """Namespaces, tc and cgroups all need root; say so in one line."""
    if os.geteuid() != 0:
        raise InputError(
            "cluster",
            "an emulated cluster needs root (network namespaces, tc, cgroups)",
            "run as root, e.g. with sudo",
        )


class EmulatedCluster:
    """Hosts in network namespaces behind one shaped bridge; see the module docstring."""

    def __init__(
        self,
        hosts: Sequence[HostSpec],
        buffer_s: float = 0.02,
        run_id: str | None = None,
        *,
        keep: bool = False,
        racks: Sequence[RackSpec] = (),
    ) -> None:
        self.hosts: list[HostSpec] = validate_hosts(hosts)
        self.racks: list[RackSpec] = list(racks)
        for host in self.hosts:
            if host.rack is not None and host.rack >= len(self.racks):
                raise InputError(f"{host.name}.rack", f"no rack {host.rack} (the cluster has "
                                 f"{len(self.racks)})", "give a RackSpec per rack")
        if isinstance(buffer_s, bool) or not isinstance(buffer_s, (int, float)):
            raise InputError("buffer_s", f"must be a number of seconds, got {buffer_s!r}")
        if not math.isfinite(buffer_s) or not 0 < buffer_s <= 10:
            raise InputError("buffer_s", f"must be in (0, 10] seconds, got {buffer_s!r}")
        if run_id is not None and not _RUN_ID.match(str(run_id)):
            raise InputError("run_id", f"{run_id!r} is not 1-12 lowercase letters or digits")
        self.buffer_s = float(buffer_s)
        self.keep = keep
        self.owner_pid = os.getpid()
        self.created_at: float | None = None
        self._run_id = run_id
        self._by_name = {h.name: (i, h) for i, h in enumerate(self.hosts)}
        self._prev_handlers: dict[int, Any] = {}
        self._torn_down = False
        self._started = False

    # ----------------------------------------------------------------- names

    @property
    def run_id(self) -> str:
        if self._run_id is None:
            self._run_id = new_run_id()
        return self._run_id

    @property
    def switch_namespace(self) -> str:
        return f"{NS_PREFIX}{self.run_id}"

    @property
    def cgroup_root(self) -> Path:
        return cgroups.CPU_ROOT / f"{CGROUP_PREFIX}{self.run_id}"

    @property
    def state_path(self) -> Path:
        return STATE_DIR / f"{self.run_id}.json"

    def _host(self, host_name: str) -> tuple[int, HostSpec]:
        try:
            return self._by_name[host_name]
        except KeyError:
            known = ", ".join(self._by_name)
            raise InputError("host", f"no host named {host_name!r}", f"known: {known}") from None

    def namespace(self, host_name: str) -> str:
        """Name of the host's network namespace (usable with ``ip -n`` / ``ip netns exec``)."""
        self._host(host_name)
        return f"{NS_PREFIX}{self.run_id}-{host_name}"

    def ip(self, host_name: str) -> str:
        """IPv4 address of the host's eth0, from the benchmarking range 198.18.0.0/15."""
        index, _ = self._host(host_name)
        return str(SUBNET.network_address + index + 1)

    def port(self, host_name: str) -> str:
        """Bridge-side veth of the host, in its switch's namespace (:meth:`switch_of`)."""
        index, _ = self._host(host_name)
        return f"port{index}"

    def rack_namespace(self, rack: int) -> str:
        """Namespace of rack switch ``rack``."""
        return f"{NS_PREFIX}{self.run_id}-rack-{rack}"

    def switch_of(self, host_name: str) -> str:
        """Namespace of the switch the host hangs off (its rack's, or the core switch)."""
        _, host = self._host(host_name)
        return self.switch_namespace if host.rack is None else self.rack_namespace(host.rack)

    def _namespaces(self) -> list[str]:
        """Every namespace of the cluster: hosts, rack switches, then the core switch."""
        return [*(self.namespace(h.name) for h in self.hosts),
                *(self.rack_namespace(r) for r in range(len(self.racks))),
                self.switch_namespace]

    def cgroup(self, host_name: str) -> Path | None:
        """The host's CPU cgroup directory, or None when it has no quota."""
        _, host = self._host(host_name)
        return None if host.cpu_quota is None else self.cgroup_root / host_name

    # ------------------------------------------------------------- processes

    def command(self, host_name: str, argv: list[str], *, in_cgroup: bool = True) -> list[str]:
        """``argv`` prefixed to run in the host's netns (and its CPU cgroup, if it has one).

        Uses ``nsenter --net=`` rather than ``ip netns exec``, which would hide /sys/fs/cgroup.
        """
        if not argv:
            raise InputError("argv", "empty command")
        prefix = ["nsenter", f"--net={netns.netns_path(self.namespace(host_name))}", "--"]
        group = self.cgroup(host_name)
        if in_cgroup and group is not None:
            return [*prefix, *cgroups.wrap(group, list(argv))]
        return [*prefix, *argv]

    def popen(
        self, host_name: str, argv: list[str], *, in_cgroup: bool = True, **popen_kwargs: Any
    ) -> subprocess.Popen:
        """Start ``argv`` on the host; it is killed at tear-down if still running."""
        return subprocess.Popen(self.command(host_name, argv, in_cgroup=in_cgroup), **popen_kwargs)

    def port_bytes(self) -> dict[str, dict[str, int]]:
        """Bytes per host on its switch port (:func:`ddlperf.measure.counters.port_bytes`)."""
        from ddlperf.measure.counters import port_bytes

        return port_bytes(self)

    def loopback_shaped(self, host_name: str) -> bool:
        """The host's ``lo`` has one class per rank (a server of several GPU ranks)."""
        return bool(self._host(host_name)[1].intra_bps)

    @property
    def has_servers(self) -> bool:
        """Some host runs several GPU ranks (a server with a shaped loopback)."""
        return any(h.intra_bps for h in self.hosts)

    def gates_ranks(self, hosts: Sequence[str]) -> bool:
        """Do ranks placed on ``hosts`` (one entry per rank) wait at the gate for their
        classes? Whenever a host runs several ranks — a server's GPUs, or a worker beside a
        colocated shard: their flows to one peer host would otherwise share that peer's
        per-host class as one FIFO, where the two roles' flows are two connections that fair
        queueing serves apart (:func:`ddlperf.measure.shaping.add_pair_classes`)."""
        return self.has_servers or len(set(hosts)) < len(hosts)

    def classify_ranks(self, ranks: list[Any]) -> dict[str, int]:
        """Classes for connected ranks (:func:`ddlperf.measure.rank_classes.classify`)."""
        from ddlperf.measure.rank_classes import classify

        return classify(self, ranks)

    def reach(self, host_name: str, peers: list[str], direction: str) -> float:
        """What flows between the host and ``peers`` can reach (:func:`hosts.reach`)."""
        self._host(host_name)
        return reach(self.hosts, self.racks, host_name, peers, direction)

    def path(self, src: str, dst: str) -> list[tuple[str, str, float, int]]:
        """The shaped devices a packet from host ``src`` to host ``dst`` crosses, in order:
        (namespace, device, line rate bit/s, leaf limit bytes)."""
        _, s = self._host(src)
        _, d = self._host(dst)

        def port_limit(rate: float) -> int:
            return shaping.buffer_bytes(rate, self.buffer_s, shaping.SWITCH_PORT_BUFFER_BYTES)

        out = [(self.namespace(src), HOST_DEV, s.uplink_bps,
                shaping.buffer_bytes(s.uplink_bps, self.buffer_s))]
        if s.rack != d.rack and s.rack is not None:
            rate = self.racks[s.rack].uplink_bps
            out.append((self.rack_namespace(s.rack), RACK_UPLINK, rate, port_limit(rate)))
        if s.rack != d.rack and d.rack is not None:
            rate = self.racks[d.rack].downlink_bps
            out.append((self.switch_namespace, f"rack{d.rack}", rate, port_limit(rate)))
        out.append((self.switch_of(dst), self.port(dst), d.downlink_bps,
                    port_limit(d.downlink_bps)))
        return out

    # ------------------------------------------------------------ life cycle

    def __enter__(self) -> EmulatedCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.keep:
            self.teardown()
        self._restore_signals()

    @classmethod
    def up(
        cls,
        hosts: Sequence[HostSpec],
        buffer_s: float = 0.02,
        run_id: str | None = None,
        racks: Sequence[RackSpec] = (),
    ) -> EmulatedCluster:
        """Bring a cluster up and leave it running (``keep=True``); the state file remembers it."""
        cluster = cls(hosts, buffer_s, run_id, keep=True, racks=racks)
        cluster.start()
        cluster._restore_signals()
        return cluster

    def start(self) -> None:
        """Create everything; on any failure (or a signal) tear the partial cluster down."""
        if self._started:
            raise RuntimeError("this EmulatedCluster was already started")
        require_root()
        self._check_tools()
        if self._run_id is not None and run_id_in_use(self._run_id):
            raise InputError("run_id", f"{self._run_id!r} is already in use", "pick another")
        self._install_signals()
        self._started = True
        try:
            self.created_at = time.time()
            self.save_state()  # first, so an interrupted set-up is recognisable and cleanable
            self._create()
            self.save_state()
        except BaseException:
            self.teardown()
            self._restore_signals()
            raise
        if not self.keep:
            atexit.register(self.teardown)

    def _check_tools(self) -> None:
        for tool in ("ip", "tc", "nsenter"):
            try:
                subprocess.run([tool, "-V"], capture_output=True, check=False, timeout=10)
            except FileNotFoundError:
                raise InputError(
                    "cluster", f"'{tool}' is not installed", "install iproute2 and util-linux"
                ) from None
        if any(h.cpu_quota is not None for h in self.hosts) and not cgroups.available():
            raise InputError(
                "cpu_quota",
                f"cgroup v1 cpu controller not found at {cgroups.CPU_ROOT}",
                "drop the CPU quotas",
            )

    def _create(self) -> None:
        _add_switch(self.switch_namespace)
        for rack in range(len(self.racks)):
            self._create_rack(rack)
        for host in self.hosts:
            ns, port, sw = self.namespace(host.name), self.port(host.name), self.switch_of(
                host.name)
            netns.add(ns)
            netns.sysctl(
                ns, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"
            )
            netns.ip(sw, "link", "add", port, "type", "veth", "peer", "name", HOST_DEV, "netns", ns)
            netns.ip(sw, "link", "set", port, "master", BRIDGE)
            netns.ip(sw, "link", "set", port, "up")
            netns.ip(ns, "link", "set", "lo", "up")
            netns.ip(ns, "addr", "add", f"{self.ip(host.name)}/{SUBNET.prefixlen}", "dev", HOST_DEV)
            netns.ip(ns, "link", "set", HOST_DEV, "up")
            peers = [self.ip(other.name) for other in self.hosts if other is not host]
            shaping.shape_egress(ns, HOST_DEV, host.uplink_bps, self.buffer_s, peers)
            netns.sysctl(ns, "net.ipv4.tcp_limit_output_bytes="
                         f"{shaping.socket_queue_bytes(host.uplink_bps, self.buffer_s)}")
            shaping.shape_ingress(sw, port, host.downlink_bps, peers, self.buffer_s)
            if host.intra_bps:
                shaping.shape_loopback(ns, host.intra_bps, host.ranks, self.buffer_s)
            group = self.cgroup(host.name)
            if group is not None:
                cgroups.create(group, host.cpu_quota)

    def _create_rack(self, rack: int) -> None:
        """Rack switch ``rack`` and its shaped link to the core switch: the rack's uplink is
        shaped where it leaves the rack switch, its downlink where it leaves the core switch,
        each like a switch port (one fair class per sender, ≥ 1 MB each)."""
        spec, ns, core = self.racks[rack], self.rack_namespace(rack), self.switch_namespace
        _add_switch(ns)
        core_port = f"rack{rack}"
        netns.ip(core, "link", "add", core_port, "type", "veth", "peer", "name", RACK_UPLINK,
                 "netns", ns)
        for where, dev in ((core, core_port), (ns, RACK_UPLINK)):
            netns.ip(where, "link", "set", dev, "master", BRIDGE)
            netns.ip(where, "link", "set", dev, "up")
        inside = [self.ip(h.name) for h in self.hosts if h.rack == rack]
        outside = [self.ip(h.name) for h in self.hosts if h.rack != rack]
        shaping.shape_ingress(ns, RACK_UPLINK, spec.uplink_bps, inside, self.buffer_s)
        shaping.shape_ingress(core, core_port, spec.downlink_bps, outside, self.buffer_s)

    def teardown(self) -> None:
        """Kill host processes, delete namespaces (and so the veths), cgroups and state file.

        Idempotent; objects already gone are fine. Other failures become warnings so the rest
        of the tear-down still happens.
        """
        problems: list[str] = []
        with _deferred_signals():
            for ns in (self.namespace(h.name) for h in self.hosts):
                _attempt(problems, lambda ns=ns: netns.kill_pids(netns.pids(ns)))
            _attempt(problems, lambda: cgroups.remove(self.cgroup_root))
            for ns in self._namespaces():
                _attempt(problems, lambda ns=ns: netns.delete(ns))
            _attempt(problems, lambda: self.state_path.unlink(missing_ok=True))
            self._torn_down = True
            with contextlib.suppress(Exception):
                atexit.unregister(self.teardown)
        self._restore_signals()  # a torn-down cluster has nothing left to guard
        for problem in problems:
            warnings.warn(f"ddlperf cluster {self.run_id} tear-down: {problem}", stacklevel=2)

    def alive(self) -> bool:
        """True when the switch and every host namespace exist."""
        names = set(netns.list_netns())
        return all(ns in names for ns in self._namespaces())

    # ------------------------------------------------------------------ state

    def to_state(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "buffer_s": self.buffer_s,
            "keep": self.keep,
            "owner_pid": self.owner_pid,
            "created_at": self.created_at,
            "switch_namespace": self.switch_namespace,
            "cgroup_root": str(self.cgroup_root),
            "racks": [{**asdict(r), "namespace": self.rack_namespace(i)}
                      for i, r in enumerate(self.racks)],
            "hosts": [
                {
                    **asdict(h),
                    "ip": self.ip(h.name),
                    "namespace": self.namespace(h.name),
                    "port": self.port(h.name),
                    "switch": self.switch_of(h.name),
                    "cgroup": None if self.cgroup(h.name) is None else str(self.cgroup(h.name)),
                }
                for h in self.hosts
            ],
        }

    def save_state(self, path: Path | None = None) -> Path:
        """Write the state JSON atomically (temp file + rename)."""
        path = path or self.state_path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.to_state(), indent=2))
        os.replace(tmp, path)
        return path

    @classmethod
    def from_state(cls, path: Path | str) -> EmulatedCluster:
        """Re-attach to a cluster from its state file (``keep=True``: no auto tear-down)."""
        path = Path(path)
        try:
            state = json.loads(path.read_text())
            hosts = [
                HostSpec(h["name"], h["uplink_bps"], h["downlink_bps"], h.get("cpu_quota"),
                         h.get("intra_bps"), h.get("ranks", 1), h.get("rack"))
                for h in state["hosts"]
            ]
            racks = [RackSpec(r["uplink_bps"], r["downlink_bps"])
                     for r in state.get("racks", [])]
            cluster = cls(hosts, state["buffer_s"], state["run_id"], keep=True, racks=racks)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError("state file", f"cannot read {path}: {exc}") from exc
        cluster.keep = bool(state.get("keep", True))
        cluster.owner_pid = int(state.get("owner_pid", 0))
        cluster.created_at = state.get("created_at")
        cluster._started = True
        return cluster

    # ---------------------------------------------------------------- signals

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals only reach the main thread; atexit/`cluster down` still clean up
        for sig in _SIGNALS:
            # a process started with the signal ignored (a shell's background job ignores
            # SIGINT) keeps ignoring it: tearing the network down and going on would leave the
            # run to fail on a missing namespace
            if signal.getsignal(sig) == signal.SIG_IGN:
                continue
            self._prev_handlers[sig] = signal.signal(sig, self._on_signal)

    def _restore_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread installs (and may restore) handlers
        for sig, handler in self._prev_handlers.items():
            signal.signal(sig, handler)
        self._prev_handlers = {}

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        prev = self._prev_handlers.get(signum, signal.SIG_DFL)
        self._restore_signals()
        self.teardown()
        if callable(prev):
            prev(signum, frame)
        elif prev != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)


def _add_switch(ns: str) -> None:
    netns.add(ns)
    netns.sysctl(ns, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
    netns.ip(ns, "link", "set", "lo", "up")
    netns.ip(ns, "link", "add", BRIDGE, "type", "bridge")
    netns.ip(ns, "link", "set", BRIDGE, "up")


def _attempt(problems: list[str], action: Any) -> None:
    try:
        action()
    except CommandError as exc:
        if not exc.gone:
            problems.append(str(exc))
    except FileNotFoundError:
        pass
    except OSError as exc:
        problems.append(str(exc))


@contextlib.contextmanager
def _deferred_signals() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while tearing down, then deliver them to the restored handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {sig: signal.signal(sig, lambda s, _f: pending.append(s)) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)


# --------------------------------------------------------------- discovery


def state_files() -> list[Path]:
    try:
        return sorted(STATE_DIR.glob("*.json"))
    except OSError:
        return []


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def leftover_run_ids() -> set[str]:
    """Run ids that own a ddlperf namespace or cgroup."""
    ids = {rid for ns in netns.list_netns() if (rid := run_id_of_netns(ns))}
    with contextlib.suppress(OSError):
        for path in cgroups.CPU_ROOT.glob(f"{CGROUP_PREFIX}*"):
            rid = path.name[len(CGROUP_PREFIX) :]
            if _RUN_ID.match(rid):
                ids.add(rid)
    return ids


def remove_run(rid: str) -> None:
    """Remove every object of run ``rid`` found by name, without a state file."""
    if not _RUN_ID.match(rid):
        raise InputError("run_id", f"{rid!r} is not a ddlperf run id")
    problems: list[str] = []
    with _deferred_signals():
        names = [ns for ns in netns.list_netns() if run_id_of_netns(ns) == rid]
        hosts_first = sorted(names, key=lambda ns: ns == f"{NS_PREFIX}{rid}")
        for ns in hosts_first:
            _attempt(problems, lambda ns=ns: netns.kill_pids(netns.pids(ns)))
        _attempt(problems, lambda: cgroups.remove(cgroups.CPU_ROOT / f"{CGROUP_PREFIX}{rid}"))
        for ns in hosts_first:
            _attempt(problems, lambda ns=ns: netns.delete(ns))
        _attempt(problems, lambda: (STATE_DIR / f"{rid}.json").unlink(missing_ok=True))
    for problem in problems:
        warnings.warn(f"ddlperf run {rid} clean-up: {problem}", stacklevel=2)


def read_states() -> dict[str, EmulatedCluster | None]:
    """Run id -> cluster for every state file (None when the file cannot be read)."""
    states: dict[str, EmulatedCluster | None] = {}
    for path in state_files():
        try:
            states[path.stem] = EmulatedCluster.from_state(path)
        except InputError:
            states[path.stem] = None
    return states


def orphan_run_ids(states: dict[str, EmulatedCluster | None] | None = None) -> set[str]:
    """Runs nobody looks after: objects without a readable state file, or a temporary
    cluster whose owning process is gone. Kept clusters and live owners are never orphans."""
    states = read_states() if states is None else states
    orphans = {rid for rid in leftover_run_ids() if states.get(rid) is None}
    for rid, cluster in states.items():
        if cluster is None or (not cluster.keep and not pid_alive(cluster.owner_pid)):
            orphans.add(rid)
    return orphans
