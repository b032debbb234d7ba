"""A bad argument to a host command: one line on stderr naming it, exit status 2, nothing touched."""

import pytest

from trainer.contract.exitcodes import ExitCode

BAD_ARGUMENTS = [
    ("scripts/run", ["--worker", "3"], {}, ["'--worker'", "did you mean --workers?"]),
    ("scripts/run", ["--workers", "17"], {}, ["--workers", "1 to 16", "'17'"]),
    ("scripts/run", ["--workers", "0"], {}, ["--workers", "'0'"]),
    ("scripts/run", ["--workers"], {}, ["run: --workers needs a number"]),
    ("scripts/run", ["--network", "moon"], {}, ["--network 'moon' must be one of lan, wan, lossy, thin"]),
    ("scripts/run", ["--network", "wna"], {}, ["'wna'", "did you mean wan?"]),
    (
        "scripts/run",
        ["--network", "wan", "--workers", "1"],
        {},
        ["--network shapes the links between workers: not with --workers 1"],
    ),
    ("scripts/run", ["--fault", "cut worker-1 at step 8 for 5s"], {}, ["run: --fault goes with --network"]),
    (
        "scripts/run",
        ["--network", "lan", "--fault", "cut worker-1 at noon"],
        {},
        ["run: --fault 'cut worker-1 at noon' is not a fault (cut WORKER [in | out] at step N"],
    ),
    (
        "scripts/run",
        ["--network", "lan", "--workers", "3", "--fault", "cut worker-3 at step 8 for 5s"],
        {},
        ["no worker-3 in this cluster (worker-0, worker-1, worker-2)"],
    ),
    ("scripts/run", ["--link", "worker-0 <-> worker-1: wan"], {}, ["run: --link goes with --network"]),
    (
        "scripts/run",
        ["--network", "lan", "--workers", "3", "--link", "worker-0 <-> worker-3: wan"],
        {},
        ["run: --link 'worker-0 <-> worker-3: wan': no worker-3 in this cluster (worker-0, worker-1, worker-2)"],
    ),
    (
        "scripts/run",
        ["--network", "lan", "--link", "worker-0 <-> worker-1: fast"],
        {},
        ["run: --link 'worker-0 <-> worker-1: fast': 'fast' is not a profile (lan, wan, lossy, thin)"],
    ),
    (
        "scripts/run",
        ["--network", "lan", "--workers", "3", "--fault", "worker-2 <-> worker-5: thin at step 3 for 5s"],
        {},
        [
            "run: --fault 'worker-2 <-> worker-5: thin at step 3 for 5s': no worker-5 in this cluster "
            "(worker-0, worker-1, worker-2)"
        ],
    ),
    ("scripts/run", ["--dry-run", "--recover=yes"], {}, ["--recover takes no value, got 'yes'"]),
    ("scripts/run", ["--slow", "worker-1"], {}, ["run: --slow 'worker-1' must be NAME=CPUS, such as worker-1=0.25"]),
    ("scripts/run", ["--slow", "worker-1=fast"], {}, ["--slow 'worker-1=fast': CPUS must be a positive", "'fast'"]),
    ("scripts/run", ["--slow", "worker-1=0"], {}, ["--slow 'worker-1=0': CPUS must be a positive number", "got '0'"]),
    ("scripts/run", ["--slow", "worker-1=-1"], {}, ["--slow 'worker-1=-1': CPUS must be a positive number"]),
    ("scripts/run", ["--slow", "worker-1=inf"], {}, ["--slow 'worker-1=inf': CPUS must be a positive number"]),
    ("scripts/run", ["--slow", "worker-1=0.001"], {}, ["CPUS must be at least 0.01 (Docker's least limit)"]),
    ("scripts/run", ["--slow", "worker-2=1"], {}, ["--slow worker-2: no such worker in this run (worker-0, worker-1)"]),
    ("scripts/run", ["--slow", "worker1=0.5"], {}, ["--slow worker1: no such worker", "did you mean worker-1?"]),
    ("scripts/run", ["--workers", "1", "--slow", "worker-1=0.5"], {}, ["no such worker in this run (worker-0)"]),
    ("scripts/run", ["--slow", "worker-1=4096"], {}, ["--slow worker-1=4096: more CPUs than this machine has ("]),
    ("scripts/run", ["--slow", "worker-1=0.5", "--slow", "worker-1=1"], {}, ["worker-1 is given twice (0.5 and 1)"]),
    ("scripts/run", ["--slow"], {}, ["run: --slow needs NAME=CPUS"]),
    ("scripts/run", ["--bogus"], {}, ["'--bogus'", "usage: scripts/run [-h] [--workers N]"]),
    ("scripts/run", ["4"], {}, ["unknown argument '4'"]),
    ("scripts/run", ["--dry-run"], {"TRAINER_SCRIPT": "no/such/train.py"}, ["TRAINER_SCRIPT 'no/such/train.py'"]),
    ("scripts/partition", ["--bogus"], {}, ["partition: unknown argument '--bogus'"]),
    ("scripts/partition", ["worker-x"], {}, ["partition: 'worker-x' is not a worker's name (worker-N)"]),
    ("scripts/partition", ["worker-1", "--now"], {}, ["partition: unknown argument '--now'"]),
    ("scripts/partition", [], {}, ["partition: usage: scripts/partition WORKER [--heal | --direction in|out]"]),
    ("scripts/setup", ["--bogus"], {}, ["setup: unknown argument '--bogus'"]),
    ("scripts/benchmark", ["--bogus"], {}, ["benchmark: unknown argument '--bogus'"]),
    ("scripts/benchmark", ["--run", "5"], {}, ["'--run'", "did you mean --runs?"]),
    ("scripts/benchmark", ["--runs", "0"], {}, ["--runs must be a whole number, at least 1, got '0'"]),
    ("scripts/workers.py", ["0"], {}, ["workers.py: the number of workers must be a whole number from 1 to 16"]),
    ("scripts/workers.py", [], {}, ["workers.py: N is missing"]),
    ("scripts/workers.py", ["3", "--target", "kubernets"], {}, ["'kubernets'", "did you mean kubernetes?"]),
    ("scripts/workers.py", ["3", "--bogus"], {}, ["workers.py: unknown argument '--bogus'"]),
    ("scripts/workers.py", ["3", "--output"], {}, ["workers.py: --output needs a file name"]),
]


def bad_argument_cases():
    for command, arguments, variables, expected in BAD_ARGUMENTS:
        yield pytest.param(command, arguments, variables, expected, id=" ".join([command, *arguments]))
    yield pytest.param(
        "scripts/verify",
        ["--timeout", "0", "x.log"],
        {},
        ["--timeout"],
        id="verify --timeout 0",
    )


@pytest.mark.parametrize(("command", "arguments", "variables", "expected"), list(bad_argument_cases()))
def test_a_bad_argument_is_one_line_naming_it_and_exit_2(sandbox, command, arguments, variables, expected):
    result = sandbox.run(command, *arguments, **variables)
    assert result.returncode == ExitCode.CONFIG_ERROR
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    for text in expected:
        assert text in result.stderr
    sandbox.assert_untouched()
