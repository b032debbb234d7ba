"""scripts/tfcluster/project/: your env files, requirements and command, read as Compose and pip would."""

import pytest
from tfcluster.errors import Refusal
from tfcluster.project import envfiles, names, program, requirements


def parse(tmp_path, text: str, **environ: str) -> dict[str, str]:
    path = tmp_path / "settings.env"
    path.write_text(text)
    return dict(envfiles.parse_env_file(str(path), environ))


def test_an_env_file_is_read_by_composes_documented_rules(tmp_path):
    text = (
        "# comments and blank lines are skipped\n"
        "\n"
        "   # indented too\n"
        "export BATCH=64\n"
        "SPACED = two words   # an inline comment needs a blank before it\n"
        "HASH=a#b\n"
        "SINGLE='literal $WHO \\n \\'quoted\\''\n"
        'DOUBLE="tab\\there \\"quoted\\" \\$WHO $WHO"\n'
        'LINES="one\n'
        'two" # a comment after the closing quote\n'
        "DEFAULTS=${UNSET:-fallback} ${WHO:+set} ${UNSET-} $$ $BATCH\n"
        "WHO\n"
        "UNSET\n"
    )
    assert parse(tmp_path, text, WHO="me") == {
        "BATCH": "64",
        "SPACED": "two words",
        "HASH": "a#b",
        "SINGLE": "literal $WHO \\n 'quoted'",
        "DOUBLE": 'tab\there "quoted" $WHO me',
        "LINES": "one\ntwo",
        "DEFAULTS": "fallback set  $ 64",
        # A bare name takes its value from the environment, and is left out if it is not set there.
        "WHO": "me",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("A=1\nB C=2\n", "line 2: expected NAME=VALUE, got 'B C=2'"),
        ("A=1\njust words\n", "line 2: expected NAME=VALUE, got 'just words'"),
        ("A: 1\n", "line 1: expected NAME=VALUE, got 'A: 1'"),
        ("\n\nA='open\n", "line 3: unterminated quoted value 'open"),
        ("A='x' B=2\n", "line 1: A: unexpected 'B=2' after the closing quote"),
        ("A=${B\n", "line 1: ${B has no closing brace"),
        ("A=${B:?say B}\n", "line 1: B is unset or empty: say B"),
        ("A=${!B}\n", "line 1: ${!B} is not a valid substitution"),
        ("JOB_COMPLETION_INDEX=0\n", "line 1: JOB_COMPLETION_INDEX is set by the harness"),
        ("export TF_NETWORK_PROFILE=wan\n", "line 1: TF_NETWORK_PROFILE is a setting of the harness"),
    ],
)
def test_a_bad_env_file_line_is_named_by_its_number(tmp_path, text, message):
    with pytest.raises(Refusal) as refused:
        parse(tmp_path, text)
    assert str(refused.value).startswith(f"--env-file {tmp_path / 'settings.env'} {message}")


@pytest.mark.parametrize(
    "value",
    ["plain", "", "two words", "it's", "$HOME and ${HOME}", 'say "hi"', "a\\b", "ends\\", "it's\\", "#x", " padded "],
)
def test_every_value_written_to_the_env_file_reads_back_as_it_was(tmp_path, value):
    assert parse(tmp_path, your_lines({"VALUE": value}), HOME="/elsewhere") == {"VALUE": value}


def test_a_multi_line_value_reads_back_as_it_was(tmp_path):
    for value in ("one\ntwo", "it's\non two lines"):
        assert parse(tmp_path, your_lines({"VALUE": value})) == {"VALUE": value}


def your_lines(variables: dict[str, str]) -> str:
    """The env file's text without its list of names, which is the harness's (and so refused)."""
    text = envfiles.env_file_text(variables)
    return text[: text.rindex("TFCLUSTER_USER_ENV=")]


def test_the_env_file_lists_your_names_for_the_launchers():
    text = envfiles.env_file_text({"B": "2", "A": "1"})
    assert text.splitlines()[-3:] == ["A='1'", "B='2'", "TFCLUSTER_USER_ENV=A,B"]
    assert envfiles.env_file_text({}).endswith("\nTFCLUSTER_USER_ENV=\n")


def test_a_value_compose_cannot_hold_is_refused():
    with pytest.raises(Refusal, match="VALUE: a value with both a ' and a final"):
        envfiles.env_file_text({"VALUE": " it's a \\"})


def test_later_sources_win():
    assert envfiles.merge([("A", "1"), ("B", "1")], [("A", "2")]) == {"B": "1", "A": "2"}


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("TF_USE_LEGACY_KERAS", True),
        ("TF_CPP_MIN_LOG_LEVEL", True),
        ("WANDB_MODE", True),
        ("TF_CONFIG", False),
        ("TF_STOP_GRACE", False),
        ("TFCLUSTER_USER_ENV", False),
        ("TRAIN_ANYTHING", False),
        ("HOME", False),
        ("PYTHONWARNINGS", False),
        ("PYTHONHASHSEED", True),
    ],
)
def test_the_reserved_names(name, allowed):
    assert (names.reserved(name) is None) == allowed


def test_requirements_are_normalized_sorted_and_deduplicated(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text("# mine\n\nTqdm >= 4.0, < 5  # progress\nrequests[Socks]\nrich==15.0.0\nrich==15.0.0\n")
    assert requirements.parse_requirements(str(path)) == (["requests[socks]", "rich==15.0.0", "tqdm>=4.0,<5"], [])


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("-r other.txt", "is an option"),
        ("--extra-index-url https://example.org", "is an option"),
        ("-e .", "is an option"),
        ("tqdm==4.67.1 --hash=sha256:00", "is an option"),
        ("git+https://example.org/tqdm.git", "is a URL or a path"),
        ("./wheels/tqdm.whl", "is a URL or a path"),
        ('tqdm; python_version < "3.12"', "has an environment marker"),
        ("my package", "is not a requirement specifier"),
    ],
)
def test_a_requirement_line_that_is_not_a_specifier_is_refused_by_its_number(tmp_path, line, message):
    path = tmp_path / "requirements.txt"
    path.write_text(f"tqdm\n{line}\n")
    with pytest.raises(Refusal) as refused:
        requirements.parse_requirements(str(path))
    assert str(refused.value).startswith(f"{path} line 2: {line!r} {message}")


@pytest.fixture
def mounts(tmp_path) -> program.Mounts:
    (tmp_path / "project" / "model" / "cli").mkdir(parents=True)
    (tmp_path / "project" / "train.py").write_text("")
    (tmp_path / "project" / "model" / "train.py").write_text("")
    (tmp_path / "project" / "model" / "cli" / "__main__.py").write_text("")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "prepare.py").write_text("")
    return program.Mounts(str(tmp_path / "project"), str(tmp_path / "data"))


@pytest.mark.parametrize(
    "command",
    [
        "python train.py --epochs 2",
        "python3 -u -W ignore -X dev /project/train.py",
        "python -- train.py",
        "python -m model.train",
        "python -mmodel.cli",
        "python -um model.cli",
        "python -m trainer.training",
        "python -c 'print(1)'",
        "python /data/prepare.py",
        "python /app/elsewhere.py",
        "bash -c 'python train.py'",
        "torchrun train.py",
    ],
)
def test_a_command_whose_program_can_be_found_or_cannot_be_known_passes(mounts, command):
    program.check_command(program.split_command(command), mounts)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("python gone.py", "the script 'gone.py' is not a file of /project"),
        ("python -X dev model/gone.py", "the script 'model/gone.py' is not a file of /project"),
        ("python /data/gone.py", "the script '/data/gone.py' is not a file of /data"),
        ("python ../train.py", "'../train.py' leads out of /project (to /train.py)"),
        ("python -m model.gone", "module 'model.gone' is not in the project"),
        ("python -m model", "module 'model' is not in the project"),
        ("python -m json.tool", "module 'json.tool' is not in the project"),
        ("python -m 'not a module'", "'not a module' is not a module name"),
        ("python -W", "python's -W needs a value"),
        ("./gone.sh", "the program './gone.sh' is not a file of /project"),
    ],
)
def test_a_command_whose_program_is_missing_is_refused(mounts, command, message):
    with pytest.raises(Refusal) as refused:
        program.check_command(program.split_command(command), mounts)
    assert message in str(refused.value)


def test_tensorflow_and_keras_are_the_images_own_and_not_installed_again(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text("tensorflow\ntf-keras==2.21.0\nkeras\ntqdm==4.67.1\n")
    assert requirements.parse_requirements(str(path)) == (
        ["tqdm==4.67.1"],
        ["keras", "tensorflow", "tf-keras==2.21.0"],
    )


@pytest.mark.parametrize("line", ["tensorflow==2.15.0", "tf_keras<2.21", "keras==2.15.0"])
def test_another_tensorflow_than_the_images_is_refused_naming_it(tmp_path, line):
    path = tmp_path / "requirements.txt"
    path.write_text(f"{line}\n")
    with pytest.raises(Refusal) as refused:
        requirements.parse_requirements(str(path))
    assert str(refused.value).startswith(f"{path} line 1: ")
    assert "conflicts with the image's" in str(refused.value)


@pytest.mark.parametrize(
    "line",
    [
        "tensorflow>=2.16",
        "tensorflow<3",
        "tensorflow==2.21.*",
        "tensorflow~=2.21",
        "keras>=3",
        "tf-keras~=2.21.0",
        "tensorflow>=2.10,<2.22",
        "tensorflow!=2.20.0",
    ],
)
def test_a_version_range_the_images_tensorflow_meets_is_provided(tmp_path, line):
    path = tmp_path / "requirements.txt"
    path.write_text(f"{line}\n")
    assert requirements.parse_requirements(str(path))[0] == []


@pytest.mark.parametrize("line", ["tensorflow<2.21", "tensorflow==2.20.*", "keras~=3.14.0", "tensorflow>2.21.0"])
def test_a_version_range_the_images_tensorflow_misses_is_refused(tmp_path, line):
    path = tmp_path / "requirements.txt"
    path.write_text(f"{line}\n")
    with pytest.raises(Refusal, match="conflicts with the image's"):
        requirements.parse_requirements(str(path))
