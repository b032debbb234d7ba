"""tfcluster's host side: everything that runs on the machine, not in a container.

One package by role, over one Python API (`Cluster`, tfcluster/cluster/):

  installed/  installed with pip: the `tfcluster` command and the pytest plugin (home.py: their root)
  commands/   the command line: one module per command, its parser and `main`, nothing else
  cluster/    the cluster run: the plan, its steps, the Compose files and overrides, the one Compose driver
  project/    your project: options, env files, requirements, command checks, baking
  deploy/     the cluster rendered for other orchestrators: Docker Swarm, Kubernetes
  nodes/      real hosts on one machine: namespaces, engines, the registry, the swarm, faults
  ci/         CI: the verdict as JUnit XML, bind mounts from inside a job container
  benchmark/  the figures in docs/benchmark.md and docs/observer-benchmark.md
  setup/      the set-up (scripts/setup): Compose, base images, wheels, images, each skipped when in place
  images/     what the set-up decides by: the pins file, each image's inputs, the digest of them

The layers (pyproject.toml's import-linter contracts), top to bottom: installed; commands; benchmark and
nodes; deploy; cluster; ci; project; setup; images. It uses the standard library, itself and
trainer.contract only (never a runtime role): `scripts/run` must work with nothing but python3.
"""

__all__ = ["Cluster", "Refusal", "Run", "Worker"]


def __getattr__(name: str):
    # The API on first use (PEP 562): the set-up before every run, or a
    # command's --help, then loads none of the cluster's modules it does not need.
    if name == "Refusal":
        from tfcluster.errors import Refusal

        return Refusal
    if name in ("Run", "Worker"):
        from tfcluster.cluster import result

        return getattr(result, name)
    if name == "Cluster":
        from tfcluster.cluster.api import Cluster

        return Cluster
    raise AttributeError(f"module 'tfcluster' has no attribute {name!r}")
