"""`scripts/run --project`: bad input is one line naming it and exit status 2, refused before any set-up."""

import pytest

from trainer.contract.exitcodes import ExitCode

# (arguments, files written into the project first, variables, what the one line must say), run
# from the project's parent folder, so that paths are the user's own, relative to where they are.
PROJECT_BAD_INPUTS = [
    (["--project", "no/such"], {}, {}, "run: --project 'no/such' is not a folder\n"),
    (["--project", "empty"], {}, {}, "run: --project 'empty' has no train.py: give --command\n"),
    (
        ["--project", "mine", "--command", "python missing.py"],
        {},
        {},
        "the script 'missing.py' is not a file of /project",
    ),
    (
        ["--project", "mine", "--command", "python -u ../mine/train.py"],
        {},
        {},
        "'../mine/train.py' leads out of /project",
    ),
    (
        ["--project", "mine", "--command", "python -u -W ignore -X dev gone.py"],
        {},
        {},
        "the script 'gone.py' is not a file",
    ),
    (
        ["--project", "mine", "--command", "python -m model.missing"],
        {},
        {},
        "module 'model.missing' is not in the project",
    ),
    (["--project", "mine", "--command", "python3 -m torch.distributed.run"], {}, {}, "module 'torch.distributed.run'"),
    (["--project", "mine", "--command", "python -m"], {}, {}, "run: --command: python's -m needs a value\n"),
    (["--project", "mine", "--command", "./run.sh"], {}, {}, "the program './run.sh' is not executable"),
    (["--project", "mine", "--command", "./gone.sh"], {}, {}, "the program './gone.sh' is not a file of /project"),
    (["--project", "mine", "--command", "python 'unclosed"], {}, {}, "cannot be split as a shell would"),
    (["--project", "mine", "--command", ""], {}, {}, "run: --command is empty\n"),
    (["--project", "mine", "--data", "no/data"], {}, {}, "run: --data 'no/data' is not a folder\n"),
    (
        ["--project", "mine", "--env", "TF_CONFIG={}"],
        {},
        {},
        "run: --env TF_CONFIG is set by the harness on every worker",
    ),
    (
        ["--project", "mine", "--env", "TFCLUSTER_PROJECT_DIR=/x"],
        {},
        {},
        "run: --env TFCLUSTER_PROJECT_DIR is set by the harness",
    ),
    (["--project", "mine", "--env", "PYTHONPATH=/x"], {}, {}, "run: --env PYTHONPATH is set by the harness"),
    (
        ["--project", "mine", "--env", "TRAIN_EPOCHS=5"],
        {},
        {},
        "run: --env TRAIN_EPOCHS is a setting of the harness: set it in scripts/run's environment instead",
    ),
    (["--project", "mine", "--env", "TF_RUN_TIMEOUT=60"], {}, {}, "TF_RUN_TIMEOUT=... scripts/run ..."),
    (["--project", "mine", "--env", "BATCH"], {}, {}, "run: --env 'BATCH' must be NAME=VALUE"),
    (["--project", "mine", "--env", "MY-VAR=1"], {}, {}, "run: --env 'MY-VAR' is not a variable name"),
    (["--project", "mine", "--env-file", "mine/gone.env"], {}, {}, "run: --env-file 'mine/gone.env' does not exist\n"),
    (
        ["--project", "mine", "--env-file", "mine/bad.env"],
        {"bad.env": "# mine\nBATCH=64\nTF_WORKER_HOSTS=a,b\n"},
        {},
        "run: --env-file mine/bad.env line 3: TF_WORKER_HOSTS is set by the harness",
    ),
    (
        ["--project", "mine", "--env-file", "mine/bad.env"],
        {"bad.env": "\nexport TRAIN_SEED=1\n"},
        {},
        "run: --env-file mine/bad.env line 2: TRAIN_SEED is a setting of the harness",
    ),
    (
        ["--project", "mine", "--env-file", "mine/bad.env"],
        {"bad.env": "BATCH=64\nGREETING='hello\nworld\nnot an assignment\n"},
        {},
        "run: --env-file mine/bad.env line 2: unterminated quoted value 'hello\n",
    ),
    (
        ["--project", "mine", "--env-file", "mine/bad.env"],
        {"bad.env": "BATCH=64\nnot an assignment\n"},
        {},
        "run: --env-file mine/bad.env line 2: expected NAME=VALUE, got 'not an assignment'\n",
    ),
    (
        ["--project", "mine"],
        {"requirements.txt": "tqdm==4.67.1\n-r more.txt\n"},
        {},
        "run: mine/requirements.txt line 2: '-r more.txt' is an option",
    ),
    (
        ["--project", "mine", "--requirements", "mine/other.txt"],
        {"other.txt": "# mine\n--index-url https://example.org/simple\n"},
        {},
        "run: mine/other.txt line 2: '--index-url https://example.org/simple' is an option",
    ),
    (
        ["--project", "mine", "--requirements", "mine/other.txt"],
        {"other.txt": "tqdm @ https://example.org/tqdm.whl\n"},
        {},
        "run: mine/other.txt line 1: 'tqdm @ https://example.org/tqdm.whl' is a URL or a path",
    ),
    (
        ["--project", "mine", "--requirements", "mine/gone.txt"],
        {},
        {},
        "run: --requirements 'mine/gone.txt' is not a file\n",
    ),
    (
        ["--project", "mine"],
        {"requirements.txt": "tqdm\n"},
        {"EXTRA_REQUIREMENTS": "rich"},
        "run: EXTRA_REQUIREMENTS and mine/requirements.txt do not go together",
    ),
    (
        ["--project", "mine"],
        {},
        {"TRAINER_SCRIPT": "mine/train.py"},
        "run: --project and TRAINER_SCRIPT do not go together",
    ),
    (["--env", "BATCH=64"], {}, {}, "run: --env goes with --project DIR (your training project)\n"),
    (["--data", "data"], {}, {}, "run: --data goes with --project DIR"),
    (["--command", "python train.py"], {}, {}, "run: --command goes with --project DIR"),
    (["--project"], {}, {}, "run: --project needs a folder\n"),
    (["--project", "mine", "--env"], {}, {}, "run: --env needs NAME=VALUE\n"),
    # --bake: the project in an image of its own.
    (["--bake"], {}, {}, "run: --bake goes with --project DIR (your training project)\n"),
    (["--tag", "mine:1"], {}, {}, "run: --tag goes with --bake (the name of the image it builds)\n"),
    (["--project", "mine", "--tag", "mine:1"], {}, {}, "run: --tag goes with --bake"),
    (["--project", "mine", "--bake", "--tag"], {}, {}, "run: --tag needs an image name\n"),
    (["--project", "mine", "--bake", "--tag", "Mine:1"], {}, {}, "run: --tag 'Mine:1' is not an image name"),
    (["--project", "mine", "--bake", "--tag", "mine@sha256:" + "0" * 64], {}, {}, "is not an image name"),
    (
        ["--project", "mine", "--bake", "--tag", "tfcluster:latest"],
        {},
        {},
        "run: --tag 'tfcluster:latest' would replace an image of the harness's own",
    ),
    (["--project", "mine", "--bake", "--tag", "mine:2"], {}, {"TFCLUSTER_IMAGE": "mine:2"}, "harness's own"),
    (
        ["--project", "mine", "--bake"],
        {".dockerignore": "# Not in the image\n*.py\n"},
        {},
        "run: --command: the script 'train.py' is left out of the image by --bake (by the project's .dockerignore",
    ),
    (
        ["--project", "mine", "--bake", "--command", "python -m model.cli"],
        {".dockerignore": "model\n"},
        {},
        "run: --command: module 'model.cli' (model/cli/__main__.py) is left out of the image by --bake",
    ),
    (
        # `*.py` takes back the project's top-level scripts only, not those below a folder left out.
        ["--project", "mine", "--bake", "--command", "python model/train.py"],
        {".dockerignore": "*\n!*.py\n"},
        {},
        "run: --command: the script 'model/train.py' is left out of the image by --bake",
    ),
    (["--project", "mine", "--bake"], {".dockerignore": "*.pyc\n  !  \n"}, {}, ".dockerignore line 2: '!' alone"),
    (["--project", "mine", "--bake"], {".dockerignore": "data[\n"}, {}, ".dockerignore line 1: 'data[' is not a valid"),
    (
        ["--project", "mine", "--bake"],
        {".tfcluster-project.Dockerfile": "FROM scratch\n"},
        {},
        "has a .tfcluster-project.Dockerfile, a name the build context keeps for its own",
    ),
]


@pytest.mark.parametrize(
    ("arguments", "files", "variables", "expected"),
    [
        pytest.param(*case, id=" ".join(case[0]) + "".join(f" [{name}]" for name in case[1]))
        for case in PROJECT_BAD_INPUTS
    ],
)
def test_bad_input_for_your_project_is_one_line_naming_it_and_exit_2(
    sandbox, training_project, arguments, files, variables, expected
):
    for name, text in files.items():
        (training_project / name).write_text(text)
    result = sandbox.run("scripts/run", *arguments, "--dry-run", cwd=training_project.parent, **variables)
    assert result.returncode == ExitCode.CONFIG_ERROR, result.stdout
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("run: ")
    assert expected in result.stderr
    sandbox.assert_untouched()


def test_your_project_is_checked_before_anything_is_set_up(sandbox, training_project):
    # Not a dry run: refused all the same, with nothing written and Docker never called.
    result = sandbox.run("scripts/run", "--project", "mine", "--env", "HOME=/root", cwd=training_project.parent)
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert result.stderr == (
        "run: --env HOME is set by the harness on every worker, not by you (docs/bring-your-own.md)\n"
    )
    sandbox.assert_untouched()
