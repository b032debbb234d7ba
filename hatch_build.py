"""The wheel's build hook: the harness's files, as a checkout has them, into tfcluster/_home.

An installed tfcluster runs from a copy of these (scripts/tfcluster/home.py): the Compose files,
the Dockerfiles and pins, the trainer package its image is built from, and scripts/ (the commands
and the host package, run from the copy as in a checkout). Each file is taken as the sdist would
take it: what .gitignore leaves out (the downloaded wheels, generated Compose files, bytecode)
stays out, so the wheel is the revision's, not whatever else lies on the builder's disk. The host
package itself, scripts/tfcluster, is the wheel's `tfcluster`, once: the copy takes it from there.
"""

from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# From the root: the files and folders a run reads.
HOME = ("compose.yaml", "compose.*.yaml", ".dockerignore", "docker", "trainer", "scripts", "examples")
PACKAGE = "scripts/tfcluster/"


class HomeHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        for pattern in HOME:
            for found in sorted(root.glob(pattern)):
                for path in [found] if found.is_file() else sorted(found.rglob("*")):
                    relative = path.relative_to(root).as_posix()
                    excluded = relative.startswith(PACKAGE) or self.build_config.path_is_excluded(relative)
                    if path.is_file() and not excluded:
                        build_data["force_include"][str(path)] = f"tfcluster/_home/{relative}"
