"""scripts/workers.py: the N-worker override, rendered from compose.yaml's own worker-1."""

import re

import pytest
import workers  # scripts/workers.py: pytest puts scripts/ on the path (pyproject.toml).

from tests.conftest import ROOT, run_python


def services(text: str) -> list[str]:
    return re.findall(r"^  ([a-z0-9-]+):$", text, flags=re.MULTILINE)


def test_the_default_host_names_are_compose_yamls_own():
    # The override's naming must match the two services compose.yaml defines by hand.
    declared = re.search(r"^  TF_WORKER_HOSTS: (\S+)$", (ROOT / "compose.yaml").read_text(), re.MULTILINE)
    assert declared.group(1) == ",".join(workers.worker_names(workers.DEFAULT_WORKERS))
    for name in workers.worker_names(workers.DEFAULT_WORKERS):
        assert re.search(rf"^  {name}:$", (ROOT / "compose.yaml").read_text(), re.MULTILINE)


def test_four_workers_extend_worker_1_and_all_share_one_host_list():
    text = workers.render(4)
    assert services(text) == ["worker-0", "worker-1", "worker-2", "worker-3", "verifier"]
    assert text.count("TF_WORKER_HOSTS: worker-0,worker-1,worker-2,worker-3\n") == 5
    assert text.count("extends: {file: compose.yaml, service: worker-1}") == 2
    assert (
        "  worker-3:\n    extends: {file: compose.yaml, service: worker-1}\n    hostname: worker-3\n"
        '    environment:\n      TF_WORKER_HOSTS: worker-0,worker-1,worker-2,worker-3\n      TF_TASK_INDEX: "3"\n'
    ) in text
    assert "depends_on: !override [worker-0, worker-1, worker-2, worker-3]" in text


def test_one_worker_leaves_worker_1_out_of_the_run():
    text = workers.render(1)
    assert "  worker-1:\n    profiles: [not-in-this-cluster]" in text
    assert "depends_on: !override [worker-0]" in text
    assert "extends" not in text
    assert "      TRAIN_MIN_ACCURACY: ${TRAIN_MIN_ACCURACY:-0.7}\n" in text
    assert "TRAIN_MIN_ACCURACY" not in workers.render(3)


@pytest.mark.parametrize("count", [0, 17, -1])
def test_a_count_out_of_range_is_refused(count):
    with pytest.raises(ValueError, match=f"1 to 16, got {count}"):
        workers.render(count)


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
    assert output.read_text() == workers.render(3)


def test_every_worker_runs_your_own_trainer_exactly_as_compose_byo_yaml_says():
    byo = (ROOT / "compose.byo.yaml").read_text()
    # The same keys, indented as a service's, are compose.byo.yaml's anchor for the default two.
    for line in workers.OWN_TRAINER_LINES:
        assert "\n" + line[2:] + "\n" in byo, line
    text = workers.render(3, own_trainer=True)
    assert text.count("    command: [python, /user/train.py]\n") == 3
    assert text.count(":/user/train.py:ro\n") == 3
    assert "/user/train.py" not in workers.render(3)
