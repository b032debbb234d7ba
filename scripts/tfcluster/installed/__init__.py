"""tfcluster installed into your environment (`pip install`): the `tfcluster` command (cli.py) and
the pytest plugin (plugin.py), both over the harness's per-user root (tfcluster/home.py)."""
