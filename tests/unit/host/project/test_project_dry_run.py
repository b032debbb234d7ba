"""`scripts/run --project --dry-run`: your project, data, variables and requirements as a run would take them."""

import re

from tfcluster.project import requirements

from tests.unit.host.conftest import DOWN_BEGUN

# The run's own folder, for the default project (tfcluster/cluster/runs.py).
RUN = ".tfcluster/runs/tfcluster"


def test_the_dry_run_of_your_project_on_the_default_two_workers(sandbox, training_project):
    result = sandbox.run("scripts/run", "--project", "mine", "--dry-run", cwd=training_project.parent)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "compose files  compose.yaml:compose.project.yaml (COMPOSE_FILE)\n" in text
    # The default command, since the project has a train.py.
    assert "trainer        your command, in /project on every worker: python train.py (compose.project.yaml)\n" in text
    assert f"your project   {training_project}, read-only at /project (TFCLUSTER_PROJECT_DIR=/project)\n" in text
    assert "your data      none" in text
    assert "your variables none (--env, --env-file); .tfcluster/runs/tfcluster/env is written with none\n" in text
    assert "requirements   none (no requirements.txt in the project, no --requirements)\n" in text
    assert "tfcluster:latest (worker-0)" in text
    assert (
        f"  write .tfcluster/runs/tfcluster/env\n  {DOWN_BEGUN}\n"
        "  scripts/setup --image-id-file .tfcluster/runs/tfcluster/image\n" in text
    )
    assert f"TFCLUSTER_PROJECT={training_project} TFCLUSTER_COMMAND='python train.py'" in text
    sandbox.assert_untouched()


def test_the_dry_run_of_your_project_data_variables_and_three_workers(sandbox, training_project):
    (training_project / "requirements.txt").write_text("# What the model needs\nTqdm >= 4.0\nrich==15.0.0  # pinned\n")
    result = sandbox.run(
        "scripts/run",
        "--project",
        "mine",
        "--command",
        "python -m model.cli --epochs 2",
        "--data",
        "data",
        "--env-file",
        "mine/cluster.env",
        "--env",
        "BATCH=128",
        "--env",
        "TF_USE_LEGACY_KERAS=1",
        "--workers",
        "3",
        "--dry-run",
        cwd=training_project.parent,
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith(
        "scripts/run --workers 3 --project mine --command 'python -m model.cli --epochs 2' --data data "
        "--env BATCH=128 --env TF_USE_LEGACY_KERAS=1 --env-file mine/cluster.env --dry-run: what it would do"
    )
    assert "compose files  compose.yaml:.tfcluster/runs/tfcluster/compose.workers.yaml (COMPOSE_FILE)\n" in text
    assert (
        "rendered       .tfcluster/runs/tfcluster/compose.workers.yaml, by scripts/workers.py 3 --project --data\n"
        in text
    )
    assert "python -m model.cli --epochs 2 (.tfcluster/runs/tfcluster/compose.workers.yaml)\n" in text
    data = training_project.parent / "data"
    assert f"your data      {data}, read-only at /data (TFCLUSTER_DATA_DIR=/data, {RUN}/compose.workers.yaml)\n" in text
    # --env wins over the file; the values are shown, since they are the user's own.
    assert (
        "your variables BATCH=128\n"
        "               GREETING='hello world'\n"
        "               TF_USE_LEGACY_KERAS=1\n"
        f"               through {RUN}/env (env_file), with TFCLUSTER_USER_ENV=BATCH,GREETING,TF_USE_LEGACY_KERAS\n"
    ) in text
    # Normalized, sorted, and named after: an image of their own.
    tag = requirements.image_tag(["rich==15.0.0", "tqdm>=4.0"])
    assert re.fullmatch(r"tfcluster-project:[0-9a-f]{12}", tag)
    assert "requirements   rich==15.0.0 tqdm>=4.0 (EXTRA_REQUIREMENTS)\n" in text
    assert f"in the image {tag} (TFCLUSTER_IMAGE: its name, from requirements)\n" in text
    assert f"then\n               a build of {tag} (worker-0), unless current" in text
    for index in range(3):
        assert re.search(rf"^  worker-{index} +{index} +worker-0,worker-1,worker-2$", text, re.MULTILINE)
    assert (
        "  python3 scripts/workers.py 3 --project --data --output .tfcluster/runs/tfcluster/compose.workers.yaml\n"
        in text
    )
    assert f"TFCLUSTER_DATA={data} EXTRA_REQUIREMENTS='rich==15.0.0 tqdm>=4.0' TFCLUSTER_IMAGE={tag}" in text
    sandbox.assert_untouched()


def test_the_dry_run_with_data_on_two_workers_adds_compose_data_yaml(sandbox, training_project):
    result = sandbox.run(
        "scripts/run", "--project", "mine", "--data", "data", "--recover", "--dry-run", cwd=training_project.parent
    )
    assert result.returncode == 0, result.stderr
    assert (
        "compose files  compose.yaml:compose.project.yaml:compose.data.yaml:compose.recovery.yaml (COMPOSE_FILE)\n"
        in result.stdout
    )


def test_your_own_image_name_wins_over_the_one_made_from_requirements(sandbox, training_project):
    (training_project / "requirements.txt").write_text("tqdm\n")
    result = sandbox.run(
        "scripts/run", "--project", "mine", "--dry-run", cwd=training_project.parent, TFCLUSTER_IMAGE="mine:1"
    )
    assert result.returncode == 0, result.stderr
    assert "in the image mine:1 (TFCLUSTER_IMAGE: yours)\n" in result.stdout
    assert "mine:1 (worker-0)" in result.stdout
    assert "tfcluster-project" not in result.stdout


def test_the_image_tag_depends_on_the_requirements_only():
    tag = requirements.image_tag
    assert tag(["tqdm==4.67.1"]) == tag(["tqdm==4.67.1"])
    assert tag(["tqdm==4.67.1"]) != tag(["tqdm==4.67.0"])
