"""The observer's standard-library parts, without TensorFlow: its import hook and its journal.

What it records of TensorFlow itself is tested where TensorFlow is, in the image
(tests/container/test_synchronization.py): real programs, real bugs.
"""

import json
import os
import subprocess
import sys
import textwrap

from tests.conftest import ROOT
from trainer.contract import observing
from trainer.observer import VARIABLE, imports, install, journal, progress
from trainer.verifier.observed import sessions


def run(code: str, tmp_path, **variables) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter that can import tmp_path's modules and this checkout's."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": f"{tmp_path}:{ROOT}", **variables}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=30, check=False
    )


def test_the_launcher_and_the_observer_spell_the_variable_alike():
    assert VARIABLE == observing.VARIABLE
    assert progress.VARIABLE == observing.PROGRESS


def test_the_progress_file_counts_steps_and_epochs_and_never_raises(tmp_path, monkeypatch):
    path = tmp_path / "worker-1.progress"
    kept = progress.Progress(str(path))
    assert json.loads(path.read_text()) | {"time": 0} == {
        "steps": 0,
        "epochs": 0,
        "epoch_step": 0,
        "first_step": None,
        "time": 0,
    }
    kept.stepped()  # The first step is written at once, with its time.
    first = json.loads(path.read_text())
    assert first["steps"] == 1 and first["first_step"] is not None
    monkeypatch.setattr(progress, "INTERVAL", 3600)
    kept.stepped()
    assert json.loads(path.read_text())["steps"] == 1  # Not more often than the interval.
    kept.epoch_ended()  # An epoch's end is written at once.
    assert json.loads(path.read_text()) | {"time": 0, "first_step": 0} == {
        "steps": 2,
        "epochs": 1,
        "epoch_step": 2,  # Epoch 2 begins with step 3.
        "first_step": 0,
        "time": 0,
    }
    assert [entry.name for entry in tmp_path.iterdir()] == ["worker-1.progress"]  # Whole, by a rename.
    progress.Progress(str(tmp_path / "missing" / "worker-1.progress")).stepped()  # No folder: nothing, no error.


def test_a_training_loop_of_its_own_tells_its_epochs_to_the_progress_file(tmp_path):
    path = tmp_path / "worker-0.progress"
    result = run(
        """
        import trainer.observer as observer
        observer.epoch_ended()  # Not installed (outside the image, or not asked to record): nothing.
        assert observer.install()
        first = observer._installed
        assert observer.install() and observer._installed is first  # The image's .pth runs twice.
        observer.epoch_ended()
        observer.epoch_ended()
        """,
        tmp_path,
        **{VARIABLE: str(tmp_path / "journal"), progress.VARIABLE: str(path)},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(path.read_text())["epochs"] == 2


def test_a_hook_runs_once_the_module_has_run_and_the_module_keeps_its_own_loader(tmp_path):
    (tmp_path / "watched.py").write_text("VALUE = 42\n")
    result = run(
        """
        from trainer.observer import imports
        seen = []
        imports.after_import("watched", lambda module: seen.append(module.VALUE))
        import importlib.util
        assert importlib.util.find_spec("watched") is not None  # A lookup alone runs no hook, uses none up.
        assert seen == []
        import watched
        print(seen, type(watched.__loader__).__name__, type(watched.__spec__.loader).__name__)
        import importlib; importlib.reload(watched)
        print(seen)
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[42] SourceFileLoader SourceFileLoader", "[42]"]


def test_a_hook_that_raises_does_not_break_the_import(tmp_path):
    (tmp_path / "watched.py").write_text("VALUE = 1\n")
    result = run(
        """
        from trainer.observer import imports
        imports.after_import("watched", lambda module: 1 / 0)
        import watched
        print(watched.VALUE)
        """,
        tmp_path,
    )
    assert (result.returncode, result.stdout) == (0, "1\n"), result.stderr


def test_a_module_already_imported_gets_its_hook_at_once():
    seen = []
    imports.after_import("json", lambda module: seen.append(module.__name__))
    assert seen == ["json"]


def test_without_the_variable_nothing_is_installed_and_nothing_is_imported(tmp_path):
    result = run(
        """
        import sys
        from trainer.observer import install
        before = set(sys.modules)
        hooks = [finder for finder in sys.meta_path if "observer" in type(finder).__module__]
        print(install({}), sorted(set(sys.modules) - before), len(hooks))
        """,
        tmp_path,
    )
    assert result.stdout.split() == ["False", "[]", "0"], result.stderr


def test_installed_it_waits_for_tensorflow_without_importing_it(tmp_path):
    result = run(
        """
        import sys
        from trainer.observer import install
        print(install({"TFCLUSTER_OBSERVER": "/nonexistent"}), "tensorflow" in sys.modules, "numpy" in sys.modules)
        """,
        tmp_path,
    )
    assert result.stdout.split() == ["True", "False", "False"], result.stderr
    assert install({}) is False


def test_the_journal_appends_whole_lines_that_the_verifier_reads_as_one_session(tmp_path):
    path = tmp_path / "observed.jsonl"
    path.touch()
    record = journal.Journal(str(path))
    record.write("strategy", replicas=2, cluster={"worker": ["a:1", "b:1"]}, net=None)
    record.write("state", point="end", index=1, step=3, variables=[["v", "trainable", "float32", "2", "ab"]])
    lines = path.read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["strategy", "state"]
    assert len({json.loads(line)["session"] for line in lines}) == 1
    [session] = sessions(path.read_text())
    assert session.strategy["replicas"] == 2
    assert [(v.name, v.hash) for v in session.states[0].variables] == [("v", "ab")]


def test_the_journal_makes_no_file_of_its_own(tmp_path):
    journal.Journal(str(tmp_path / "absent.jsonl")).write("strategy")
    assert list(tmp_path.iterdir()) == []


def test_a_forked_child_records_a_session_of_its_own(tmp_path):
    path = tmp_path / "observed.jsonl"
    path.touch()
    record = journal.Journal(str(path))
    record.write("state")
    child = os.fork()
    if child == 0:
        record.write("state")
        os._exit(0)
    os.waitpid(child, 0)
    assert len({json.loads(line)["session"] for line in path.read_text().splitlines()}) == 2
