"""scripts/workers.py: the N-worker override, rendered from compose.yaml's own worker-1."""

import json
import re

import pytest
from tfcluster.cluster import scaling
from tfcluster.commands import workers
from tfcluster.deploy import kubernetes, swarm

from tests.conftest import ROOT, run_python


def services(text: str) -> list[str]:
    return re.findall(r"^  ([a-z0-9-]+):$", text, flags=re.MULTILINE)


def test_the_default_host_names_are_compose_yamls_own():
    # The override's naming must match the two services compose.yaml defines by hand.
    declared = re.search(r"^  TF_WORKER_HOSTS: (\S+)$", (ROOT / "compose.yaml").read_text(), re.MULTILINE)
    assert declared.group(1) == ",".join(scaling.worker_names(scaling.DEFAULT_WORKERS))
    for name in scaling.worker_names(scaling.DEFAULT_WORKERS):
        assert re.search(rf"^  {name}:$", (ROOT / "compose.yaml").read_text(), re.MULTILINE)


def test_four_workers_extend_worker_1_and_all_share_one_host_list():
    text = scaling.render(4)
    assert services(text) == ["worker-0", "worker-1", "worker-2", "worker-3", "verifier"]
    assert text.count("TF_WORKER_HOSTS: worker-0,worker-1,worker-2,worker-3\n") == 5
    assert text.count("extends: {file: compose.yaml, service: worker-1}") == 2
    assert (
        "  worker-3:\n    extends: {file: compose.yaml, service: worker-1}\n    hostname: worker-3\n"
        '    environment:\n      TF_WORKER_HOSTS: worker-0,worker-1,worker-2,worker-3\n      TF_TASK_INDEX: "3"\n'
    ) in text
    assert "depends_on: !override [worker-0, worker-1, worker-2, worker-3]" in text


def test_one_worker_leaves_worker_1_out_of_the_run():
    text = scaling.render(1)
    assert "  worker-1:\n    profiles: [not-in-this-cluster]" in text
    assert "depends_on: !override [worker-0]" in text
    assert "extends" not in text
    assert "      TRAIN_MIN_ACCURACY: ${TRAIN_MIN_ACCURACY:-0.7}\n" in text
    assert "TRAIN_MIN_ACCURACY" not in scaling.render(3)


@pytest.mark.parametrize("count", [0, 17, -1])
def test_a_count_out_of_range_is_refused(count):
    with pytest.raises(ValueError, match=f"1 to 16, got {count}"):
        scaling.render(count)


@pytest.mark.parametrize("argument", ["0", "seventeen", "2.5"])
def test_the_command_names_a_bad_count_in_one_line_and_exits_2(argument):
    result = run_python("scripts/workers.py", argument)
    assert result.returncode == 2
    assert result.stderr == f"workers.py: the number of workers must be a whole number from 1 to 16, got '{argument}'\n"
    assert result.stdout == ""


def test_the_command_writes_the_file_it_is_given(tmp_path):
    output = tmp_path / "compose.workers.yaml"
    result = run_python("scripts/workers.py", "3", "--output", str(output))
    assert result.returncode == 0, result.stderr
    assert output.read_text() == scaling.render(3)


def test_every_worker_runs_your_own_trainer_exactly_as_compose_byo_yaml_says():
    byo = (ROOT / "compose.byo.yaml").read_text()
    # The same keys, indented as a service's, are compose.byo.yaml's anchor for the default two.
    for line in scaling.OWN_TRAINER_LINES:
        assert "\n" + line[2:] + "\n" in byo, line
    text = scaling.render(3, own_trainer=True)
    assert text.count("    command: [python, /user/train.py]\n") == 3
    assert text.count(":/user/train.py:ro\n") == 3
    assert "/user/train.py" not in scaling.render(3)


def anchored_lines(lines: tuple[str, ...]) -> list[str]:
    """`lines`, indented as a service's, as they are under an `x-...` anchor of an override file."""
    return ["\n" + line[2:] + "\n" for line in lines]


def test_every_worker_runs_your_project_exactly_as_compose_project_yaml_says():
    file = (ROOT / "compose.project.yaml").read_text()
    for line in scaling.PROJECT_LINES + scaling.PROJECT_VOLUME + scaling.PROJECT_ENVIRONMENT:
        assert anchored_lines((line,))[0] in file, line
    text = scaling.render(3, project=True)
    assert text.count("    command: ${TFCLUSTER_COMMAND:-python train.py}\n") == 3
    assert text.count("    working_dir: /project\n") == 3
    assert text.count("        target: /project\n") == 3
    assert text.count("      TFCLUSTER_PROJECT_DIR: /project\n") == 3
    assert "/data" not in text


def test_every_worker_gets_your_data_exactly_as_compose_data_yaml_says():
    file = (ROOT / "compose.data.yaml").read_text()
    for line in scaling.DATA_VOLUME + scaling.DATA_ENVIRONMENT:
        assert anchored_lines((line,))[0] in file, line
    text = scaling.render(4, project=True, data=True)
    assert text.count("        target: /data\n") == 4
    assert text.count("      TFCLUSTER_DATA_DIR: /data\n") == 4
    # One `volumes:` and one `environment:` a worker, which YAML allows only once.
    worker_3 = text.split("  worker-3:\n")[1].split("\n  verifier:")[0]
    assert worker_3.count("    volumes:\n") == 1 and worker_3.count("    environment:\n") == 1
    assert worker_3.index("target: /project") < worker_3.index("target: /data")
    assert text.startswith("# Generated by `scripts/workers.py 4 --project --data`")


def test_the_override_files_keep_the_workers_results_and_checkpoints():
    # An override's `volumes:` merges with compose.yaml's by target, so neither file repeats them;
    # neither may replace the list either (no `!override`, no `!reset`).
    for name in ("compose.project.yaml", "compose.data.yaml"):
        text = (ROOT / name).read_text()
        assert "!override" not in text and "!reset" not in text
        assert "read_only: true" in text


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["3", "--data"], "workers.py: --data goes with --project (your data, for your project)\n"),
        (["3", "--own-trainer", "--project"], "workers.py: --own-trainer and --project do not go together\n"),
        (["3", "--project", "--target", "swarm"], "workers.py: --project is for the Compose target only\n"),
        (["3", "--baked"], "workers.py: --baked goes with --project (your project, baked into an image)\n"),
        (["3", "--baked", "--target", "kubernetes"], "workers.py: --baked is for the Compose target only\n"),
        (
            ["3", "--project", "--image", "mine:1"],
            "workers.py: --image is for the swarm and kubernetes targets (Compose: --project --baked)\n",
        ),
        (
            ["3", "--command", "python train.py"],
            "workers.py: --command is for the swarm and kubernetes targets (Compose: --project --baked)\n",
        ),
        (
            ["3", "--target", "swarm", "--image", "Mine:1"],
            "workers.py: --image 'Mine:1' is not an image name (lowercase NAME[:TAG][@sha256:DIGEST], "
            "e.g. registry.example.com/my-model:1)\n",
        ),
        (["3", "--target", "kubernetes", "--command", ""], "workers.py: --command is empty\n"),
        (
            ["3", "--target", "swarm", "--command", "python 'unclosed"],
            'workers.py: --command "python \'unclosed" cannot be split as a shell would: No closing quotation\n',
        ),
    ],
)
def test_the_command_refuses_options_that_do_not_go_together(arguments, message):
    result = run_python("scripts/workers.py", *arguments)
    assert result.returncode == 2
    assert result.stderr == message
    assert result.stdout == ""


def test_your_project_and_your_own_trainer_are_refused_together_by_the_renderer():
    with pytest.raises(ValueError, match="do not go together"):
        scaling.render(3, own_trainer=True, project=True)
    with pytest.raises(ValueError, match="data goes with a project"):
        scaling.render(3, data=True)
    with pytest.raises(ValueError, match="a baked image goes with a project"):
        scaling.render(3, baked=True)


# -- Your project baked into an image (scripts/run --bake) ----------------------------------------


def test_every_worker_runs_your_baked_project_exactly_as_compose_baked_yaml_says():
    file = (ROOT / "compose.baked.yaml").read_text()
    for line in (scaling.BAKED_IMAGE, *scaling.PROJECT_LINES, *scaling.PROJECT_ENVIRONMENT):
        assert anchored_lines((line,))[0] in file, line
    # worker-0 alone has a build in compose.yaml; the file resets it under worker-0's own key.
    assert "\n  worker-0:\n    <<: *baked\n" + scaling.BAKED_BUILD + "\n" in file
    text = scaling.render(4, project=True, baked=True, data=True)
    assert text.startswith("# Generated by `scripts/workers.py 4 --project --baked --data`")
    assert text.count(scaling.BAKED_IMAGE + "\n") == 4
    assert text.count(scaling.BAKED_BUILD + "\n") == 1
    assert text.index(scaling.BAKED_BUILD) < text.index("  worker-1:")
    assert text.count("    command: ${TFCLUSTER_COMMAND:-python train.py}\n") == 4
    assert text.count("      TFCLUSTER_PROJECT_DIR: /project\n") == 4
    # No mount of the project, nor any mention of its folder on the host; the data stays mounted.
    assert "target: /project" not in text and "TFCLUSTER_PROJECT:" not in text and "TFCLUSTER_PROJECT}" not in text
    assert text.count("        target: /data\n") == 4
    worker_3 = text.split("  worker-3:\n")[1].split("\n  verifier:")[0]
    assert worker_3.count("    volumes:\n") == 1 and worker_3.count("    image:") == 1


def test_compose_baked_yaml_mounts_no_project():
    text = (ROOT / "compose.baked.yaml").read_text()
    assert "TFCLUSTER_PROJECT}" not in text and "TFCLUSTER_PROJECT:" not in text
    assert "volumes:" not in text and "type: bind" not in text


# compose.yaml's worker-1 and verifier as `docker compose config` resolves them, reduced to what the
# swarm and kubernetes renderers read, so that they are tested without Docker (tests/container/
# test_deploy.py renders from the real model).
MODEL = {
    "services": {
        "worker-1": {
            "image": "tfcluster:latest",
            "environment": {
                "TF_WORKER_HOSTS": "worker-0,worker-1",
                "TF_WORKER_PORT": "12345",
                "TF_RENDEZVOUS_PORT": "12399",
                "TF_TASK_INDEX": "1",
                "TF_RESULTS_DIR": "/results",
                "TF_CHECKPOINT_DIR": "/checkpoints",
                "TRAIN_EPOCHS": "${TRAIN_EPOCHS:-3}",
            },
            "read_only": True,
            "cap_drop": ["ALL"],
            "volumes": [
                {"type": "volume", "source": "results", "target": "/results"},
                {"type": "volume", "source": "checkpoints", "target": "/checkpoints"},
            ],
            "mem_limit": "1610612736",
            "cpus": 2,
            "pids_limit": 1024,
        },
        "verifier": {
            "image": "tfcluster:latest",
            "entrypoint": ["python", "-m", "trainer.verifier"],
            "command": ["--results", "/results"],
            "environment": {"TF_WORKER_HOSTS": "worker-0,worker-1"},
            "read_only": True,
            "cap_drop": ["ALL"],
            "volumes": [{"type": "volume", "source": "results", "target": "/results", "read_only": True}],
        },
    },
    "volumes": {
        "results": {"driver_opts": {"type": "tmpfs", "device": "tmpfs"}},
        "checkpoints": {"driver_opts": {"type": "tmpfs", "device": "tmpfs"}},
    },
}
BAKED = "registry.example.com/my-model:1"


def no_host_paths(text: str) -> None:
    """Nothing of this machine's: no bind mount, no hostPath, no project folder."""
    for forbidden in ('"bind"', "hostPath", 'TFCLUSTER_PROJECT"', str(ROOT)):
        assert forbidden not in text, forbidden


def test_a_swarm_stack_runs_a_baked_project_with_no_host_path():
    stack = json.loads(swarm.render(3, MODEL, image=BAKED, command=["python", "-m", "model.train", "$HOME"]))
    worker, verifier = stack["services"]["worker"], stack["services"]["verifier"]
    assert worker["image"] == verifier["image"] == BAKED
    # `docker stack deploy` interpolates: the dollar is escaped so that the program gets it.
    assert worker["command"] == ["python", "-m", "model.train", "$$HOME"]
    # The verifier's own package, never a `trainer` of the project's in /project.
    assert verifier["working_dir"] == "/app"
    assert verifier["command"] == ["--results", "/results"]
    assert [volume["type"] for volume in worker["volumes"]] == ["volume", "volume", "tmpfs"]
    no_host_paths(json.dumps(stack))


def test_a_swarm_stack_without_an_image_is_as_before():
    stack = json.loads(swarm.render(3, MODEL))
    assert stack["services"]["worker"]["image"] == "tfcluster:latest"
    assert "command" not in stack["services"]["worker"]
    assert "working_dir" not in stack["services"]["verifier"]


def test_a_stack_for_several_nodes_puts_one_worker_on_each_and_has_no_verifier_service():
    stack = json.loads(swarm.render(3, MODEL, image=BAKED, one_per_node=True))
    assert list(stack["services"]) == ["worker"]  # Its results volume would be each node's own.
    deploy = stack["services"]["worker"]["deploy"]
    assert deploy["placement"] == {"max_replicas_per_node": 1}
    assert deploy["endpoint_mode"] == "dnsrr"  # The names resolve to the tasks, across nodes.
    assert deploy["restart_policy"] == {"condition": "none"}
    assert stack["networks"]["cluster"] == {"driver": "overlay", "internal": True, "attachable": True}
    assert "placement" not in json.loads(swarm.render(3, MODEL))["services"]["worker"]["deploy"]


def test_one_per_node_is_for_the_swarm_target_only(capsys):
    assert workers.main(["2", "--one-per-node"]) == 2
    assert capsys.readouterr().err == "workers.py: --one-per-node is for the swarm target only\n"


def test_kubernetes_manifests_run_a_baked_project_with_no_host_path():
    text = kubernetes.render(2, MODEL, image=BAKED, command=["python", "train.py", "--out=$(HOME)"])
    _service, job, _policy = [json.loads(part) for part in text.split("---\n") if part.strip()]
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == BAKED
    # args, not command: Kubernetes' command would replace the launcher, the image's entrypoint.
    assert container["args"] == ["python", "train.py", "--out=$$(HOME)"] and "command" not in container
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {"medium": "Memory"}}]
    no_host_paths(text)
    plain = kubernetes.render(2, MODEL)
    assert "args" not in json.loads(plain.split("---\n")[2])["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("target", ["swarm", "kubernetes"])
def test_the_command_renders_a_baked_project_for_swarm_and_kubernetes(monkeypatch, capsys, target):
    monkeypatch.setattr(workers.compose, "resolved_model", lambda *, interpolate: MODEL)
    status = workers.main(["2", "--target", target, "--image", BAKED, "--command", "python -m model.train --epochs 2"])
    assert status == 0
    text = capsys.readouterr().out
    assert f'"image": "{BAKED}"' in text
    assert '"python",\n' in text and '"--epochs",\n' in text
    no_host_paths(text)
