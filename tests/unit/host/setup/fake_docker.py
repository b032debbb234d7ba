"""docker, as far as the set-up asks it, acting from the state in $FAKE_DOCKER_STATE (conftest.py's
Machine): the images it has, whether its engine runs, how long a pull hangs. Every call is recorded
with its process id and the build's variables."""

import json
import os
import re
import sys
import time

BUILD_VARIABLES = ("TFCLUSTER_INPUTS", "TFCLUSTER_DEPENDENCIES", "TFCLUSTER_SHAPER_INPUTS")


def formatted(template: str, name: str, image: dict) -> str:
    text = template.replace("{{.Id}}", image["id"]).replace("{{json .RepoTags}}", json.dumps([name]))
    text = text.replace("{{json .Config.Labels}}", json.dumps(image["labels"]))
    return re.sub(r'{{index .Config.Labels "([^"]+)"}}', lambda found: image["labels"].get(found[1], ""), text)


def inspect(images: dict, arguments: list[str]) -> int:
    """`docker image inspect [--format F] NAME...`: a line for each image here, status 1 if any is not."""
    template, names = ("{{.Id}}", arguments) if arguments[0] != "--format" else (arguments[1], arguments[2:])
    for name in names:
        if name in images:
            print(formatted(template, name, images[name]))
        else:
            print(f"Error: No such image: {name}", file=sys.stderr)
    if not any(name in images for name in names):
        print()  # As the engine does: an empty line when it has none of them.
    return 0 if all(name in images for name in names) else 1


def build(images: dict, services: list[str], variables: dict) -> None:
    for service in services:
        if service == "worker-0":
            name = os.environ.get("TFCLUSTER_IMAGE") or "tfcluster:latest"
            labels = {"tfcluster.inputs": variables["TFCLUSTER_INPUTS"]}
            labels["tfcluster.dependencies"] = variables["TFCLUSTER_DEPENDENCIES"]
        else:
            name, labels = "tfcluster-shaper:latest", {"tfcluster.inputs": variables["TFCLUSTER_SHAPER_INPUTS"]}
        images[name] = {"id": f"sha256:built-{len(images)}", "labels": labels}
    print("WARN[0000] Docker Compose is configured to build using Bake, but buildx isn't installed", file=sys.stderr)


def main(arguments: list[str]) -> int:
    state_file = os.environ["FAKE_DOCKER_STATE"]
    with open(state_file) as file:
        state = json.load(file)
    variables = {name: os.environ.get(name, "") for name in BUILD_VARIABLES}
    with open(state["calls"], "a") as calls:
        calls.write(json.dumps({"arguments": arguments, "pid": os.getpid(), "variables": variables}) + "\n")
    images = state["images"]
    if arguments[0] in ("info", "version"):
        return 0 if state["engine"] else 1
    if arguments[:2] == ["compose", "version"]:
        print(state["compose"])
        return 0
    if not state["engine"]:
        return 1
    if arguments[:2] == ["image", "inspect"]:
        return inspect(images, arguments[2:])
    if arguments[0] == "pull":
        time.sleep(state["pull_seconds"])
        return 1  # No registry.
    elif arguments[0] == "compose" and "build" in arguments:
        build(images, arguments[arguments.index("--quiet") + 1 :], variables)
    elif arguments[:2] == ["image", "rm"] and images.pop(arguments[-1], None) is None:
        return 1
    with open(state_file, "w") as file:
        json.dump(state, file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
