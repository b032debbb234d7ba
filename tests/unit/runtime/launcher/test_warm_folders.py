"""A warm run's launcher clears what earlier runs left in the volumes (trainer/launcher/warm.py)."""

from trainer.launcher import warm


def test_only_the_other_runs_folders_are_cleared_and_only_under_runs(tmp_path):
    runs = tmp_path / "results" / warm.RUNS
    for run in ("earlier", "this"):
        (runs / run).mkdir(parents=True)
        (runs / run / "worker-0.log").write_text(run)
    plain = tmp_path / "checkpoints"
    (plain / "ckpt-1").mkdir(parents=True)
    warm.clear_earlier_runs(str(runs / "this"), str(plain / "ckpt-1"), "")
    assert sorted(path.name for path in runs.iterdir()) == ["this"]
    assert (runs / "this" / "worker-0.log").read_text() == "this"
    assert (plain / "ckpt-1").is_dir()  # Not a run's own folder: nothing of it is another run's.


def test_a_run_folder_not_made_yet_is_no_error(tmp_path):
    warm.clear_earlier_runs(str(tmp_path / "none" / warm.RUNS / "this"))
