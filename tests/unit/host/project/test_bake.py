"""`scripts/run --project DIR --bake`: its dry run and run, the context sent to `docker build`, and .dockerignore."""

import io
import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
from tfcluster import paths
from tfcluster.cluster import build, scaling
from tfcluster.cluster import plan as run_plan
from tfcluster.commands import run
from tfcluster.project import baking

from tests.conftest import ROOT
from tests.unit.host.conftest import DOWN, STOP, UP

# The run's own folder, for the default project (tfcluster/cluster/runs.py).
RUN = ".tfcluster/runs/tfcluster"


def test_the_help_offers_baking(sandbox):
    text = sandbox.run("scripts/run", "--help").stdout
    assert "[--bake] [--tag NAME]" in " ".join(text.split())
    assert re.search(r"^  --bake +with --project: copy DIR into an image of its own", text, re.MULTILINE)
    assert re.search(r"^  --tag NAME +with --bake: the baked image's name", text, re.MULTILINE)
    assert "scripts/run --project examples/custom-loop --bake" in text


def test_the_dry_run_of_a_baked_project_names_its_image_and_mounts_nothing(sandbox, training_project):
    (training_project / ".dockerignore").write_text("*.env\n")
    (training_project / "model" / "__pycache__").mkdir()
    (training_project / "model" / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"cached")
    result = sandbox.run("scripts/run", "--project", "mine", "--bake", "--dry-run", cwd=training_project.parent)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith("scripts/run --project mine --bake --dry-run: what it would do")
    assert "compose files  compose.yaml:compose.baked.yaml (COMPOSE_FILE)\n" in text
    assert "trainer        your command, in /project on every worker: python train.py (compose.baked.yaml)\n" in text
    assert (
        f"your project   {training_project}, copied into the image at /project, not mounted "
        "(TFCLUSTER_PROJECT_DIR=/project)\n"
    ) in text
    # Named after the files and the base image's id, which only the set-up makes known.
    assert (
        "baked image    tfcluster-baked:HASH, HASH after what is sent and the id of tfcluster:latest\n"
        "               (docker/Dockerfile.project on it), known once the set-up has built that\n"
        # train.py, run.sh and model's three; not cluster.env (.dockerignore) nor the cache.
        "               sent: 5 files and 2 folders, 28 bytes\n"
        "               left out: what .dockerignore names, __pycache__, .git, virtual environments\n"
    ) in text
    # No mount of the project: no compose.project.yaml, no host folder handed to Compose.
    assert "read-only at /project" not in text and "compose.project.yaml" not in text
    assert "TFCLUSTER_PROJECT=" not in text
    assert (
        "  scripts/setup --image-id-file .tfcluster/runs/tfcluster/image\n"
        "  docker build --quiet --file .tfcluster-project.Dockerfile --tag tfcluster-baked:HASH "
        "--build-arg TFCLUSTER_IMAGE=tfcluster:latest --label tfcluster.project.folder="
    ) in text
    assert (
        "  docker compose down --volumes --remove-orphans --timeout 1 (unless nothing left)\n"
        "  docker image rm (this folder's earlier tfcluster-baked images, if any)\n"
        "  docker image prune --force --filter label=org.opencontainers.image.title=tfcluster-baked\n"
        "  docker compose up "
    ) in text
    assert (
        "COMPOSE_FILE=compose.yaml:compose.baked.yaml COMPOSE_PROJECT_NAME=tfcluster "
        "TFCLUSTER_BAKED_IMAGE=tfcluster-baked:HASH " in text
    )
    sandbox.assert_untouched()


def test_the_dry_run_of_a_baked_project_named_by_you_with_its_data_inside_on_three_workers(sandbox, training_project):
    (training_project / "data").mkdir()
    (training_project / "data" / "points.csv").write_text("1,2\n")
    result = sandbox.run(
        "scripts/run",
        "--project",
        "mine",
        "--data",
        "mine/data",
        "--bake",
        "--tag",
        "registry.example.com/mine:1",
        "--workers",
        "3",
        "--dry-run",
        cwd=training_project.parent,
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "compose files  compose.yaml:.tfcluster/runs/tfcluster/compose.workers.yaml (COMPOSE_FILE)\n" in text
    assert f"rendered       {RUN}/compose.workers.yaml, by scripts/workers.py 3 --project --baked --data\n" in text
    assert "baked image    registry.example.com/mine:1 (--tag), docker/Dockerfile.project on tfcluster:latest\n" in text
    # The data stays out of the image, and mounted.
    assert "sent: 6 files and 2 folders, 88 bytes\n" in text
    assert "left out: __pycache__, .git, virtual environments, data/ (--data: mounted instead)\n" in text
    data = training_project / "data"
    assert f"your data      {data}, read-only at /data (TFCLUSTER_DATA_DIR=/data, {RUN}/compose.workers.yaml)\n" in text
    assert "--tag registry.example.com/mine:1 --build-arg TFCLUSTER_IMAGE=tfcluster:latest" in text
    # Your own name is yours: no earlier image is removed.
    assert "docker image rm" not in text
    assert f"  python3 scripts/workers.py 3 --project --baked --data --output {RUN}/compose.workers.yaml\n" in text
    assert "TFCLUSTER_BAKED_IMAGE=registry.example.com/mine:1 TFCLUSTER_COMMAND='python train.py' " in text
    assert f"TFCLUSTER_DATA={data} " in text and "TFCLUSTER_PROJECT=" not in text
    sandbox.assert_untouched()


def test_a_baked_run_builds_after_the_setup_and_runs_the_image_unmounted(recorded, tmp_path, monkeypatch):
    project = tmp_path / "mine"
    project.mkdir()
    (project / "train.py").write_text("")
    baked, removed = [], []

    def bake(plan_project, environment, _root):
        baked.append((plan_project.directory, environment["COMPOSE_FILE"], "TFCLUSTER_BAKED_IMAGE" in environment))
        return "tfcluster-baked:0123456789ab", 0

    monkeypatch.setattr(build, "bake", bake)
    monkeypatch.setattr(
        build, "remove_superseded", lambda _project, current, _environment, _root: removed.append(current)
    )
    status, recorder = recorded(["--project", str(project), "--bake", "--workers", "3"], codes={"up": 7})
    assert status == 7
    assert [command for command, _ in recorder.commands] == [
        (str(tmp_path / "scripts" / "setup"), "--image-id-file", ".tfcluster/runs/tfcluster/image"),
        DOWN,
        UP,
        STOP,
    ]
    # Built after the set-up (which builds the image it is built on), named only then.
    assert baked == [(str(project.resolve()), "compose.yaml:.tfcluster/runs/tfcluster/compose.workers.yaml", False)]
    environment = recorder.commands[2][1]["env"]
    assert environment["TFCLUSTER_BAKED_IMAGE"] == "tfcluster-baked:0123456789ab"
    assert "TFCLUSTER_PROJECT" not in environment
    assert (tmp_path / ".tfcluster/runs/tfcluster/compose.workers.yaml").read_text() == scaling.render(
        3, project=True, baked=True
    )
    assert removed == ["tfcluster-baked:0123456789ab"]


def test_a_failed_bake_ends_the_run_before_compose(recorded, tmp_path, monkeypatch):
    project = tmp_path / "mine"
    project.mkdir()
    (project / "train.py").write_text("")
    monkeypatch.setattr(build, "bake", lambda _project, _environment, _root: (None, 1))
    status, recorder = recorded(["--project", str(project), "--bake", "--tag", "mine:1"])
    assert status == 1
    assert len(recorder.commands) == 1  # The set-up only.


class KeptBytes(io.BytesIO):
    """A pipe's end: what was written stays readable after close()."""

    def close(self):
        self.kept = self.getvalue()
        super().close()


class FakeBuild:
    """Stands in for `docker build -`'s process: keeps the context it is sent, exits with `status`."""

    status = 0
    errors = b""
    last: "FakeBuild | None" = None

    def __init__(self, command, **options):
        self.command, self.options = command, options
        self.stdin = KeptBytes()
        FakeBuild.last = self

    def wait(self):
        self.options["stderr"].write(self.errors)
        return self.status

    def kill(self):
        pass


@pytest.fixture
def docker_build(monkeypatch):
    """A bake's Docker calls (tfcluster/cluster/build.py), faked: `image inspect` answers an id, `build` a FakeBuild."""
    inspected = []

    def inspect(command, **_options):
        inspected.append(command)
        return subprocess.CompletedProcess(command, 0, stdout="sha256:" + "1" * 64 + "\n", stderr="")

    monkeypatch.setattr(subprocess, "run", inspect)
    monkeypatch.setattr(subprocess, "Popen", FakeBuild)
    monkeypatch.setattr(FakeBuild, "status", 0)
    return inspected


def baked_plan(*arguments: str) -> run_plan.Plan:
    return run.cluster_of(run.parser().parse_args(list(arguments)), {}).plan()


@pytest.fixture
def untidy_project(tmp_path) -> Path:
    """A project as it is on disk while one works on it: caches, Git, a virtual environment, data."""
    folder = tmp_path / "mine"
    files = {
        "train.py": "print('training')\n",
        "run.sh": "#!/bin/sh\n",
        "README.md": "# Mine\n",
        "notes/keep.md": "kept\n",
        "notes/other.md": "left out\n",
        "build/out.bin": "built\n",
        "secret/key": "left out\n",
        "secret/public.txt": "taken back\n",
        "model/__init__.py": "",
        "model/__pycache__/__init__.cpython-311.pyc": "cached",
        "__pycache__/train.cpython-311.pyc": "cached",
        ".git/HEAD": "ref: refs/heads/main\n",
        ".venv/pyvenv.cfg": "home = /usr/bin\n",
        ".venv/lib/site.py": "",
        "data/points.csv": "1,2\n",
        ".dockerignore": "# Docker's own syntax\n**/*.md\n!notes/keep.md\nbuild\nsecret\n!secret/public.txt\n",
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / "train.py").chmod(0o600)
    (folder / "run.sh").chmod(0o700)
    (folder / "latest").symlink_to("train.py")
    return folder


def test_bake_sends_the_project_as_docker_would_with_caches_git_venvs_and_data_left_out(
    docker_build, untidy_project, capsys
):
    plan = baked_plan("--project", str(untidy_project), "--data", str(untidy_project / "data"), "--bake")
    tag, status = build.bake(plan.project, {"TFCLUSTER_IMAGE": "tfcluster:latest"}, paths.ROOT)
    assert status == 0
    assert re.fullmatch(r"tfcluster-baked:[0-9a-f]{12}", tag)
    assert docker_build == [["docker", "image", "inspect", "--format", "{{.Id}}", "tfcluster:latest"]]
    label = baking.folder_label(str(untidy_project))
    assert FakeBuild.last.command == [
        *("docker", "build", "--quiet", "--file", ".tfcluster-project.Dockerfile", "--tag", tag),
        *("--build-arg", "TFCLUSTER_IMAGE=tfcluster:latest", "--label", f"tfcluster.project.folder={label}", "-"),
    ]
    assert "run | baking " in capsys.readouterr().err
    with tarfile.open(fileobj=io.BytesIO(FakeBuild.last.stdin.kept)) as context:
        members = {member.name: member for member in context.getmembers()}
        assert sorted(members) == [
            ".dockerignore",
            ".tfcluster-project.Dockerfile",
            "latest",
            "model",
            "model/__init__.py",
            "notes",
            "notes/keep.md",
            "run.sh",
            "secret/public.txt",
            "train.py",
        ]
        # Root's, readable by everyone and writable by no one else, whatever the modes on disk.
        assert {(member.uid, member.gid, member.uname) for member in members.values()} == {(0, 0, "root")}
        assert members["train.py"].mode == 0o644 and members["run.sh"].mode == 0o755
        assert members["model"].isdir() and members["model"].mode == 0o755
        assert members["latest"].issym() and members["latest"].linkname == "train.py"
        dockerfile = context.extractfile(".tfcluster-project.Dockerfile").read().decode()
        assert dockerfile == (ROOT / "docker" / "Dockerfile.project").read_text()
        # Yours, with the Dockerfile's name added: the daemon drops the Dockerfile before COPY.
        ignore = context.extractfile(".dockerignore").read().decode()
        assert ignore == (untidy_project / ".dockerignore").read_text() + ".tfcluster-project.Dockerfile\n"


def test_a_project_without_a_dockerignore_sends_one_that_leaves_itself_out(docker_build, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "train.py").write_text("")
    plan = baked_plan("--project", str(tmp_path / "mine"), "--bake", "--tag", "mine:1")
    assert build.bake(plan.project, {"TFCLUSTER_IMAGE": "tfcluster:latest"}, paths.ROOT) == ("mine:1", 0)
    assert docker_build == []  # Named by you: no id is needed.
    with tarfile.open(fileobj=io.BytesIO(FakeBuild.last.stdin.kept)) as context:
        assert context.extractfile(".dockerignore").read() == b".dockerignore\n.tfcluster-project.Dockerfile\n"
        assert sorted(context.getnames()) == [".dockerignore", ".tfcluster-project.Dockerfile", "train.py"]


def test_a_failed_build_shows_dockers_message_and_its_status(docker_build, monkeypatch, tmp_path, capsys):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "train.py").write_text("")
    monkeypatch.setattr(FakeBuild, "status", 1)
    monkeypatch.setattr(FakeBuild, "errors", b"pull access denied for nowhere\n")
    plan = baked_plan("--project", str(tmp_path / "mine"), "--bake", "--tag", "mine:1")
    assert build.bake(plan.project, {"TFCLUSTER_IMAGE": "nowhere:1"}, paths.ROOT) == (None, 1)
    error = capsys.readouterr().err
    assert "pull access denied for nowhere\n" in error
    assert error.endswith("run: --bake: docker build of mine:1 failed (exit status 1)\n")


def test_the_baked_images_name_follows_the_files_and_the_base_image_not_the_times(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "train.py").write_text("print(1)\n")
    project = baking

    def name(base_id: str) -> str:
        context = project.bake_context(str(tmp_path / "mine"), None)
        return project.baked_tag(project.context_digest(context, "FROM base\n", base_id))

    first = name("sha256:a")
    assert re.fullmatch(r"tfcluster-baked:[0-9a-f]{12}", first)
    assert name("sha256:b") != first
    os.utime(tmp_path / "mine" / "train.py", (0, 0))
    assert name("sha256:a") == first
    (tmp_path / "mine" / "train.py").write_text("print(2)\n")
    assert name("sha256:a") != first


# Docker's own examples and rules for .dockerignore (docs.docker.com, "Build context"), and
# moby/patternmatcher's: each (patterns, path, left out).
DOCKERIGNORE_CASES = [
    ("*/temp*", "somedir/temporary.txt", True),
    ("*/temp*", "temp", False),
    ("*/*/temp*", "somedir/subdir/temporary.txt", True),
    ("temp?", "tempa", True),
    ("temp?", "temp", False),
    ("**/*.go", "main.go", True),
    ("**/*.go", "a/b/main.go", True),
    ("*.md\n!README*.md\nREADME-secret.md", "README-secret.md", True),
    ("*.md\n!README*.md\nREADME-secret.md", "README.md", False),
    ("*.md\n!README*.md\nREADME-secret.md", "notes.md", True),
    ("/build/", "build/out.bin", True),
    ("./build", "build", True),
    ("build/**", "build", False),
    ("build/**", "build/a/b", True),
    ("manual", "manual/index.md", True),
    ("manual", "src/manual", False),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/y/b", True),
    ("file.txt", "file-txt", False),
    ("[ab]*", "bcd", True),
    ("\\*x", "*x", True),
]


@pytest.mark.parametrize(("patterns", "path", "left_out"), DOCKERIGNORE_CASES)
def test_the_dockerignore_is_read_as_docker_reads_it(patterns, path, left_out):
    project = baking
    assert project.ignored(path, project.parse_dockerignore(patterns, ".dockerignore")) is left_out
