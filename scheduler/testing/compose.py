"""The emulated cluster of ``docker-compose.yml`` (and its Slurm overlay) driven on a real Docker engine.

:class:`ComposeCluster` builds the image (with a base image made from Debian
packages by ``docker/make-base-image.sh`` when no registry can be reached),
brings the head and the compute nodes up under its own compose project name,
runs commands in them, and takes everything down again. The shipped compose
files are used as they are; only ``RESHAPE_BASE_IMAGE`` is passed. The
cluster test tier (``tests/test_cluster_*.py``) and ``benchmarks.slurm_workload``
use it; it needs the repository (the compose files and ``docker/``).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REGISTRY_BASE = "python:3.11-slim-bookworm"
DEBIAN_BASE = "reshape-base:bookworm"
SERVICES = ("head", "node1", "node2", "node3", "node4")


def wait_for(pred, timeout: float, every: float = 0.1):
    """Poll ``pred`` until it returns something truthy (returned) or fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")


def _run(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def compose_command() -> list[str] | None:
    """``docker compose`` (v2 plugin) or ``docker-compose`` (v1), whichever works."""
    if shutil.which("docker"):
        try:
            if _run(["docker", "compose", "version"], 20).returncode == 0:
                return ["docker", "compose"]
        except (OSError, subprocess.TimeoutExpired):
            pass
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def unavailable() -> str | None:
    """Why the cluster cannot run here (one line), or None."""
    if not shutil.which("docker"):
        return "no docker CLI (apt-get install docker.io; .ci/run installs it as root)"
    try:
        info = _run(["docker", "info", "--format", "{{.ServerVersion}}"], 30)
    except subprocess.TimeoutExpired:
        return "the Docker engine does not answer (docker info timed out)"
    if info.returncode != 0:
        return f"no Docker engine: {(info.stderr.strip().splitlines() or ['docker info failed'])[-1]}"
    if compose_command() is None:
        return "no docker compose / docker-compose (apt-get install docker-compose)"
    return None


def base_image() -> tuple[str | None, str]:
    """The base image to build on and how it was found, or (None, why not)."""
    if os.environ.get("RESHAPE_BASE_IMAGE"):
        return os.environ["RESHAPE_BASE_IMAGE"], "RESHAPE_BASE_IMAGE"
    for image in (REGISTRY_BASE, DEBIAN_BASE):
        if _run(["docker", "image", "inspect", image], 30).returncode == 0:
            return image, "present"
    if _run(["docker", "pull", REGISTRY_BASE], 300).returncode == 0:
        return REGISTRY_BASE, "pulled"
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        return None, "no registry and no debootstrap as root to build a base image"
    r = _run([os.path.join(ROOT, "docker", "make-base-image.sh"), DEBIAN_BASE], 900)
    if r.returncode != 0:
        return None, f"docker/make-base-image.sh failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}"
    return DEBIAN_BASE, "built from Debian packages"


def benchmark_cluster(prefix: str, files: tuple[str, ...]) -> ComposeCluster | str:
    """The cluster of a benchmark run (project ``prefix`` and this process's id), or why there is none (one
    line). SIGTERM then exits so that a ``timeout`` around the run still takes the cluster down."""
    why = unavailable()
    base, how = base_image() if why is None else (None, why)
    if base is None:
        return how
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return ComposeCluster(f"{prefix}{os.getpid()}", base, files)


class ComposeCluster:
    """One compose project of the shipped ``docker-compose.yml``."""

    def __init__(self, project: str, base: str, files: tuple[str, ...] = ("docker-compose.yml",)):
        self.project = project
        self.files = [a for f in files for a in ("-f", os.path.join(ROOT, f))]
        self.compose = compose_command() or ["docker-compose"]
        self.env = {**os.environ, "RESHAPE_BASE_IMAGE": base, "COMPOSE_PROJECT_NAME": project}

    def cmd(self, *args: str, timeout: float = 120, check: bool = True, input: str | None = None
            ) -> subprocess.CompletedProcess:
        argv = [*self.compose, "-p", self.project, *self.files, *args]
        r = _run(argv, timeout, env=self.env, cwd=ROOT, input=input)
        if check and r.returncode != 0:
            raise AssertionError(f"{shlex.join(argv)} -> {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        return r

    # ---------------------------------------------------------------- lifecycle
    def build(self) -> float:
        t0 = time.monotonic()
        self.cmd("build", timeout=1200)
        return time.monotonic() - t0

    def up(self, timeout: float = 180) -> float:
        t0 = time.monotonic()
        self.cmd("up", "-d", timeout=timeout)
        self.wait_healthy(timeout - (time.monotonic() - t0))
        return time.monotonic() - t0

    def container(self, service: str) -> str:
        return self.cmd("ps", "-q", service).stdout.strip()

    def health(self, service: str) -> str:
        cid = self.container(service)
        if not cid:
            return "missing"
        r = _run(["docker", "inspect", "--format", "{{.State.Status}}/{{if .State.Health}}"
                  "{{.State.Health.Status}}{{end}}", cid], 30)
        return r.stdout.strip()

    def healths(self) -> dict[str, str]:
        """``health`` of every service of the project at once: two docker commands, no compose command
        (one compose command per service is seconds per look on a loaded machine)."""
        ids = _run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={self.project}"],
                   30).stdout.split()
        if not ids:
            return {}
        r = _run(["docker", "inspect", "--format", '{{index .Config.Labels "com.docker.compose.service"}} '
                  "{{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{end}}", *ids], 30)
        return dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)

    def wait_healthy(self, timeout: float, services=SERVICES) -> None:
        end = time.monotonic() + timeout
        while True:
            now = self.healths()
            states = {s: now.get(s, "missing") for s in services}
            if all(v == "running/healthy" for v in states.values()):
                return
            if time.monotonic() > end:
                raise AssertionError(f"services not healthy after {timeout:.0f}s: {states}\n"
                                     f"{self.cmd('logs', '--tail', '40', check=False).stdout[-4000:]}")
            time.sleep(0.5)

    def down(self) -> None:
        self.cmd("down", "-v", "--remove-orphans", "--timeout", "5", timeout=180, check=False)

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, networks and volumes of this project that still exist."""
        label = f"label=com.docker.compose.project={self.project}"
        out = {}
        for kind, argv in (("containers", ["docker", "ps", "-a", "-q", "--filter", label]),
                           ("networks", ["docker", "network", "ls", "-q", "--filter", label]),
                           ("volumes", ["docker", "volume", "ls", "-q", "--filter", label])):
            out[kind] = _run(argv, 30).stdout.split()
        return out

    # ---------------------------------------------------------------- inside the cluster
    def exec(self, service: str, command: str, timeout: float = 60, check: bool = True,
             input: str | None = None) -> subprocess.CompletedProcess:
        """``sh -c command`` in ``service`` (working directory /opt/reshape)."""
        return self.cmd("exec", "-T", service, "sh", "-c", command, timeout=timeout, check=check, input=input)

    def reshape(self, *args: str, timeout: float = 60) -> str:
        return self.exec("head", shlex.join(["reshape", *args]), timeout=timeout).stdout

    def status(self) -> dict:
        return json.loads(self.reshape("status", "--json"))

    def history(self) -> dict:
        """The daemon's whole ``history`` reply (jobs with profiles and errors, events, node events)."""
        out = self.exec("head", "python -c " + shlex.quote(
            "import json; from reshape.joblink.client import request; from reshape.joblink.protocol import History; "
            "print(json.dumps(request('tcp://127.0.0.1:5555', History(), timeout=30).body))")).stdout
        return json.loads(out)

    def jobs(self) -> dict[int, dict]:
        return {j["job_id"]: j for j in self.history()["jobs"]}

    def submit(self, path: str) -> int:
        return json.loads(self.reshape("submit", "--json", path))["job_ids"][0]

    def submit_text(self, name: str, toml: str) -> int:
        path = f"/tmp/{name}.toml"
        self.exec("head", f"cat > {path}", input=toml)
        return self.submit(path)

    def job_pids(self, service: str, job_id: int) -> list[int]:
        """Processes in ``service`` carrying the job's tag (``RESHAPE_JOB_TAG=/var/lib/reshape#ID``)."""
        r = self.exec(service, f"grep -zlx 'RESHAPE_JOB_TAG=/var/lib/reshape#{job_id}' /proc/[0-9]*/environ "
                               "2>/dev/null || true")
        return sorted(int(p.split("/")[2]) for p in r.stdout.split() if p.split("/")[2].isdigit())
