"""tfcluster's host side: everything that runs on the machine, not in a container.

One package by role, over one Python API (`Cluster`, tfcluster/cluster/):

  commands/   the command line: one module per command, its parser and `main`, nothing else
  cluster/    the cluster run: the plan, its steps, the Compose files and overrides, the one Compose driver
  project/    your project: options, env files, requirements, command checks, baking
  deploy/     the cluster rendered for other orchestrators: Docker Swarm, Kubernetes
  nodes/      real hosts on one machine: namespaces, engines, the registry, the swarm, faults
  ci/         CI: the verdict as JUnit XML, bind mounts from inside a job container
  benchmark/  the figures in docs/benchmark.md and docs/observer-benchmark.md

The layers (pyproject.toml's import-linter contracts): commands on top, then cluster, nodes,
deploy, ci and benchmark, then project. It uses the standard library, itself and
trainer.contract only (never a runtime role): `scripts/run` must work with nothing but python3.
"""

from tfcluster.cluster.api import Cluster, Run, Worker
from tfcluster.errors import Refusal

__all__ = ["Cluster", "Refusal", "Run", "Worker"]
