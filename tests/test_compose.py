"""The docker-compose cluster: ``docker-compose.yml`` against the Compose Specification's JSON schema
(the engine cannot run here), and the files it refers to against the project's own validators.

The schema ``docker/compose-spec.json`` is the Compose Specification schema as shipped in the
``docker-compose`` 1.29.2 package on PyPI (``compose/config/compose_spec.json``, Apache-2.0).
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess

import pytest

yaml = pytest.importorskip("yaml", reason="needs pyyaml (listed for the test extra) to read docker-compose.yml")
jsonschema = pytest.importorskip("jsonschema", reason="needs jsonschema (listed for the test extra)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPOSE = os.path.join(ROOT, "docker-compose.yml")
SCHEMA = os.path.join(ROOT, "docker", "compose-spec.json")


@pytest.fixture(scope="module")
def compose() -> dict:
    with open(COMPOSE) as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def validator():
    with open(SCHEMA) as f:
        schema = json.load(f)
    assert schema["title"] == "Compose Specification"
    assert "2019-09" in schema["$schema"]  # spelled http://json-schema.org/draft/2019-09/schema#
    cls = jsonschema.Draft201909Validator
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def errors(validator, doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def test_compose_file_is_valid_against_the_compose_spec(compose, validator):
    assert errors(validator, compose) == []


@pytest.mark.parametrize("breakage", ["unknown service key", "healthcheck typo", "services as list", "bad name"])
def test_the_schema_check_catches_broken_files(compose, validator, breakage):
    bad = copy.deepcopy(compose)
    if breakage == "unknown service key":
        bad["services"]["node1"]["slots"] = 2
    elif breakage == "healthcheck typo":
        bad["services"]["head"]["healthcheck"]["retry"] = 3
    elif breakage == "services as list":
        bad["services"] = list(bad["services"])
    else:
        bad["services"]["bad name!"] = bad["services"].pop("node4")
    assert errors(validator, bad)


def test_head_runs_the_daemon_with_at_least_four_healthy_compute_nodes_on_a_private_network(compose):
    services = compose["services"]
    compute = sorted(s for s in services if s != "head")
    assert len(compute) >= 4
    for name, svc in services.items():
        assert svc["networks"] == ["cluster"], name
        assert svc["healthcheck"]["test"][0] == "CMD", name
        assert svc["hostname"] == name
        assert svc["build"]["dockerfile"] == "docker/Dockerfile"
        assert "cluster:/cluster" in svc["volumes"]  # the shared ssh key
    assert compose["networks"]["cluster"]["internal"] is True
    head = services["head"]
    assert head["command"][0] == "head"
    assert head["environment"]["RESHAPE_ENDPOINT"].startswith("tcp://0.0.0.0:")
    assert {n: c["condition"] for n, c in head["depends_on"].items()} == {n: "service_healthy" for n in compute}
    for name in compute:
        assert services[name]["command"] == ["compute"]


def test_ranks_may_use_cross_memory_attach_and_the_journal_outlives_the_head(compose):
    """docs/cluster.md: SYS_PTRACE for MPICH's CMA on every node; the base image is a build argument."""
    for name, svc in compose["services"].items():
        assert svc["cap_add"] == ["SYS_PTRACE"], name
        assert svc["build"]["args"]["BASE_IMAGE"] == "${RESHAPE_BASE_IMAGE:-python:3.11-slim-bookworm}", name
    assert "state:/var/lib/reshape" in compose["services"]["head"]["volumes"]
    assert set(compose["volumes"]) == {"cluster", "state"}


def test_pool_and_jobs_match_the_cluster(compose):
    from scheduler.core.jobfile import load_job_file
    from scheduler.core.pool import load_pool

    pool = load_pool(os.path.join(ROOT, "docker", "pool.toml"))
    assert sorted(n.host for n in pool.nodes) == sorted(s for s in compose["services"] if s != "head")
    jobs = sorted(os.listdir(os.path.join(ROOT, "docker", "jobs")))
    assert jobs
    for name in jobs:
        desc = load_job_file(os.path.join(ROOT, "docker", "jobs", name))
        assert desc.nprocs <= pool.total
        script = [a for a in desc.command if a.endswith(".py")]
        for s in script:
            assert os.path.exists(os.path.join(ROOT, s)), s


def test_daemon_command_line_of_the_head_is_accepted(compose):
    from scheduler.cli import build_parser
    from scheduler.core.policy import app_policy, remap_policy
    from scheduler.daemon.loop import mpiexec_on

    head = compose["services"]["head"]
    argv = ["daemon", "--endpoint", head["environment"]["RESHAPE_ENDPOINT"], "--config",
            head["environment"]["RESHAPE_POOL"].replace("/opt/reshape", ROOT), "--state-dir", "/tmp/x",
            "--workdir", "/opt/reshape", *head["command"][1:]]
    args = build_parser().parse_args(argv)
    assert args.func is not None
    app_policy(args.app_policy)
    remap_policy(args.remap_policy)
    # jobs outlive a restart of the head by the daemon's default for a pool of other hosts, not by an option
    assert args.mpiexec_on is None
    assert mpiexec_on(args.mpiexec_on, ["node1", "node2"]) == ("first-node", "the pool has hosts other than "
                                                                             "this machine")
    assert mpiexec_on(None, ["localhost"])[0] == "head" and mpiexec_on("head", ["node1"])[0] == "head"


def test_dockerfile_copies_existing_files():
    with open(os.path.join(ROOT, "docker", "Dockerfile")) as f:
        text = f.read()
    # the registry image by default; docker/make-base-image.sh makes an equivalent where none is reachable
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11-slim-bookworm$", text, re.M)
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", text, re.M)
    for src in re.findall(r"^COPY (\S+) ", text, re.M):
        assert os.path.exists(os.path.join(ROOT, src)), src


@pytest.mark.procs  # runs sh -n
def test_scripts_are_executable_and_parse():
    for script in ("docker/entrypoint.sh", "docker/make-base-image.sh", "reshape/joblink/hydra/netns-launch",
                   "reshape/joblink/hydra/slurm-launch"):
        path = os.path.join(ROOT, script)
        assert os.access(path, os.X_OK), f"{script} is not executable"
        res = subprocess.run(["sh", "-n", path], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr


def test_the_slurm_overlay_runs_a_slurmd_for_every_node_of_slurm_conf_and_nothing_waits(compose, validator):
    """docker/slurm-compose.yml (docs/slurm.md): valid on its own, one slurmd container per node of
    docker/slurm/slurm.conf (at least 16), those not in the base file defined in full like the base
    file's nodes, the head started beside them (not after their health checks) and healthy once every
    node of the default partition, which covers them all, is idle."""
    import hostlist

    with open(os.path.join(ROOT, "docker", "slurm-compose.yml")) as f:
        overlay = yaml.safe_load(f)
    assert errors(validator, overlay) == []
    with open(os.path.join(ROOT, "docker", "slurm", "slurm.conf")) as f:
        conf = f.read()
    (nodes,) = re.findall(r"^NodeName=(\S+) CPUs=2 ", conf, re.M)
    nodes = hostlist.expand_hostlist(nodes)
    parts = dict(re.findall(r"^PartitionName=(\S+) Nodes=(\S+)", conf, re.M))
    (default,) = re.findall(r"^PartitionName=(\S+) .*Default=YES", conf, re.M)
    assert len(nodes) >= 16 and hostlist.expand_hostlist(parts[default]) == nodes
    assert hostlist.expand_hostlist(parts["small"]) == ["node1", "node2", "node3", "node4"]

    services = overlay["services"]
    assert sorted(s for s in services if s != "head") == sorted(nodes)
    base = compose["services"]["node1"]
    for name in nodes:
        svc = services[name]
        assert svc["command"] == ["slurm-compute"], name
        assert svc["healthcheck"]["test"][0] == "CMD", name
        if name not in compose["services"]:
            assert svc["hostname"] == name
            assert svc["image"] == base["image"] and "build" not in svc  # the image node1..node4 build
            for key in ("volumes", "networks", "cap_add", "shm_size", "init", "restart"):
                assert svc[key] == base[key], (name, key)
    head = services["head"]
    assert head["command"] == ["slurm-head"]
    assert head["depends_on"] == {n: {"condition": "service_started"} for n in nodes}
    check = head["healthcheck"]["test"][-1]
    assert f"-p {default}" in check and f"'idle {len(nodes)}'" in check
