"""One run of a workload, driven from the Slurm cluster's head (``benchmarks.slurm_workload`` starts it there).

``python -m benchmarks.slurm_driver SPEC.json`` (in the head container)

The spec (written by ``benchmarks.slurm_workload``): ``mode`` (``static``: every job a plain
``sbatch`` at its requested size; ``reshape``: the malleable ones through the site controller),
``workload`` (a ``benchmarks.slurm_jobs`` file's content), ``dir`` (on the shared volume: the
jobs' Slurm outputs go to ``DIR/out``, the controller's log to ``DIR/controller.log``, the result
to ``DIR/result.json``), ``controller_args`` (extra ``reshape daemon --slurm-site`` options) and
``restart_at`` (seconds into the run to ``kill -9`` the controller and start it again; null: never).

Driven from here, every job is submitted at its arrival time (a submission is one ``sbatch``,
tens of milliseconds, with no container round trip), Slurm's predicted start of every pending
rigid job is read every second (``squeue %S``: the late-start count), and each job's record
(``scontrol show job``: submit, start and end to the second, state, exit code) is read as soon
as it leaves the queue. The result also holds, per job, when it was submitted (this clock) and
when its application started (``apps.emujob``'s ``started at`` line), and in the reshape run the
controller's history and notes.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import subprocess
import sys
import time

from benchmarks import calibrate_apps
from benchmarks.slurm_jobs import Job, Workload, emu_argv, job_file, job_from, limit_minutes

SITE = "tcp://head:5600"
STATE = "/var/lib/reshape/bench-site"
_KEY = re.compile(r" (?=[A-Za-z][A-Za-z0-9_:/]*=)")  # scontrol -o: values may hold '=' or be empty


def sh(command: str, timeout: float = 60, check: bool = True) -> str:
    r = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "SLURM_TIME_FORMAT": "%s"})
    if check and r.returncode:
        raise RuntimeError(f"{command} -> {r.returncode}: {r.stderr.strip()[-500:]}")
    return r.stdout


class Driver:
    def __init__(self, spec: dict):
        d = spec["workload"]
        self.w = Workload(d["name"], d["nodes"], d["cpus_per_node"],
                          tuple(job_from("spec", i, x, d["nodes"]) for i, x in enumerate(d["jobs"])))
        self.site = spec["mode"] == "reshape"
        self.dir = spec["dir"]
        self.args = list(spec.get("controller_args", []))
        self.restart_at = spec.get("restart_at")
        self.cal = calibrate_apps.load()
        self.ids: dict[str, str] = {}  # job name -> Slurm id
        self.submitted: dict[str, float] = {}  # job name -> when sbatch was called (epoch)
        self.predicted: dict[str, float] = {}  # Slurm id -> first predicted start (rigid jobs)
        self.records: dict[str, dict[str, str]] = {}
        self.restarts = 0

    def start_controller(self, fresh: bool) -> None:
        sh((f"rm -rf {STATE}; " if fresh else "") + f"mkdir -p {STATE}; nohup reshape daemon --slurm-site "
           f"--endpoint tcp://0.0.0.0:5600 --state-dir {STATE} --workdir /tmp {shlex.join(self.args)} "
           f">> {self.dir}/controller.log 2>&1 &")
        end = time.monotonic() + 60
        while sh(f"reshape status --endpoint {SITE} >/dev/null 2>&1 && echo up", check=False).strip() != "up":
            if time.monotonic() > end:
                raise RuntimeError(sh(f"tail -20 {self.dir}/controller.log"))
            time.sleep(0.2)

    def submit(self, j: Job) -> None:
        out = f"--output {self.dir}/out/%x-%j.out"
        self.submitted[j.name] = time.time()
        if j.malleable and self.site:
            from scheduler.cli.slurm import submit_slurm

            path = f"/tmp/{j.name}.toml"
            with open(path, "w") as f:
                f.write(job_file(self.w, j, self.cal))
            self.ids[j.name] = submit_slurm([path], None, [f"--output={self.dir}/out/%x-%j.out"], SITE)[0]
            return
        if j.app is None:
            body = f"sleep {j.seconds}"
        else:
            body = shlex.join([*emu_argv(self.w, j, self.cal), "--nprocs", str(j.nodes * self.w.cpus_per_node)])
        self.ids[j.name] = sh(f"sbatch --parsable -N {j.nodes} --time={limit_minutes(j)} -J {j.name} {out} "
                              f"--wrap {shlex.quote(body)}").strip().split(";")[0]

    def record(self, jid: str) -> dict[str, str]:
        """``scontrol show job -o``'s fields, read when the job leaves the queue (Slurm forgets it later)."""
        if jid not in self.records:
            line = sh(f"scontrol show job -o {jid}").strip()
            self.records[jid] = dict(x.split("=", 1) for x in _KEY.split(line) if "=" in x)
        return self.records[jid]

    def run(self) -> dict:
        os.makedirs(f"{self.dir}/out", exist_ok=True)
        if self.site:
            self.start_controller(fresh=True)
        pending = sorted(self.w.jobs, key=lambda j: j.arrival)
        t0 = time.time()
        rigid = {j.name for j in self.w.jobs if not j.malleable}
        while True:
            now = time.time() - t0
            while pending and pending[0].arrival <= now:
                self.submit(pending.pop(0))
            if self.site and self.restart_at is not None and not self.restarts and now >= self.restart_at:
                sh("pkill -9 -f '[d]aemon --slurm-site'", check=False)
                time.sleep(2.0)
                self.start_controller(fresh=False)
                self.restarts = 1
            queued = set()
            for line in sh("squeue -h -o '%i|%j|%T|%S'").splitlines():
                jid, name, state, start = line.split("|")
                queued.add(jid)
                if state == "PENDING" and name in rigid and jid not in self.predicted and start.isdigit():
                    self.predicted[jid] = float(start)
            for jid in self.ids.values():
                if jid not in queued:
                    self.record(jid)
            if not pending and not queued & set(self.ids.values()):
                break
            time.sleep(max(0.0, 1.0 - (time.time() - t0 - now)))
        return self.collect(t0)

    def app_starts(self) -> dict[str, float]:
        """When each job's application started (its output's first line), by Slurm id."""
        out = {}
        for path in glob.glob(f"{self.dir}/out/*.out"):
            with open(path, errors="replace") as f:
                m = re.search(r"^started at ([\d.]+)", f.read(), re.M)
            if m:
                out[path.rsplit("-", 1)[1][:-4]] = float(m.group(1))
        return out

    def collect(self, t0: float) -> dict:
        starts = self.app_starts()
        jobs = {}
        for j in self.w.jobs:
            jid = self.ids[j.name]
            f = self.record(jid)
            jobs[j.name] = {"slurm_id": jid, "state": f.get("JobState"), "exit": f.get("ExitCode"),
                            "submit": float(f["SubmitTime"]), "start": float(f["StartTime"]),
                            "end": float(f["EndTime"]), "nodes": j.nodes, "rigid": not j.malleable,
                            "submitted_at": self.submitted[j.name], "app_start": starts.get(jid),
                            "time_limit": f.get("TimeLimit")}
        late = [{"job": jid, "predicted": p, "started": jobs[n]["start"]}
                for n, jid in self.ids.items() for p in [self.predicted.get(jid)]
                if p is not None and jobs[n]["start"] > p + 5.0]
        out = {"t0": t0, "jobs": jobs, "late_starts": late, "restarts": self.restarts}
        if self.site:
            from reshape.joblink.client import request
            from reshape.joblink.protocol import History

            out["history"] = request(SITE, History(), timeout=30).body
            st = json.loads(sh(f"reshape status --json --endpoint {SITE}"))
            out["controller"] = {"late_starts": st["daemon"]["rm"]["rigid_late_starts"],
                                 "notes": st["daemon"]["rm"]["notes"]}
            sh("pkill -f '[d]aemon --slurm-site'", check=False)
        sh(f"tail -n 3000 /var/log/slurm/slurmctld.log > {self.dir}/slurmctld.log", check=False)
        return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m benchmarks.slurm_driver SPEC.json", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        spec = json.load(f)
    result = Driver(spec).run()
    with open(os.path.join(spec["dir"], "result.json"), "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
