"""The job's link to the scheduler: what connects a running job to the daemon and the machine.

No MPI here; every other part of reshape may use these modules.

* ``jobenv``: every ``RESHAPE_*`` environment variable, by name;
* ``protocol``: the wire format between jobs, the command line and the daemon;
* ``client``: the daemon's ZeroMQ client (``contact_scheduler``);
* ``advice``: where resize decisions come from (the scheduler, a scripted plan, nobody);
* ``auth``: CURVE keys for endpoints beyond loopback;
* ``launch``: supervised ``mpiexec`` runs (every process tagged, found and cleaned up);
* ``launchers``: how ranks reach hosts (``local``, ``ssh``, ``netns``, ``slurm``), with the
  Hydra launcher scripts of the last two in ``hydra/`` (package data);
* ``emulated``: the timing model of the emulated job (``apps.emujob``) that the
  scheduler's models of that job share.
"""
