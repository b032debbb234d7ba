"""Settings beyond TRAIN_* that change the computation, given differently to one worker of a real
cluster: the rendezvous names the field and both workers' values, and every worker exits 2 before
training, within the join bound (docs/failures.md, the matrix's rows on what the workers compare)."""

import pytest

from tests.container.conftest import override
from trainer.contract.exitcodes import ExitCode

pytestmark = [pytest.mark.container, pytest.mark.timeout(240)]

JOIN = 15  # The join deadline (the default is 60 s): a mismatch must end both workers well within it.


@pytest.mark.parametrize(
    ("variables", "field", "values"),
    [
        # Measured before the rendezvous compared it: worker-1 exited 1 after 15 s with
        # `[Op:CollectiveReduceV2]` errors, and nothing named the setting.
        ({"TF_CHECKPOINT_DIR": ""}, "TF_CHECKPOINT_DIR", ("/checkpoints", "(empty: no checkpoints)")),
        ({"TF_USE_LEGACY_KERAS": "1"}, "TF_USE_LEGACY_KERAS", ("(unset)", "1")),
    ],
    ids=["checkpoint-dir", "legacy-keras"],
)
def test_a_setting_given_to_one_worker_only_stops_every_worker_naming_it(
    compose_project, tmp_path, variables, field, values
):
    project = compose_project(override(tmp_path, {"worker-1": variables}), environment={"TF_JOIN_TIMEOUT": str(JOIN)})
    result = project.verdict()
    assert result.returncode == ExitCode.VERIFICATION_FAILED, result.stdout
    services = ("worker-0", "worker-1")
    for index, service in enumerate(services):
        log = project.logs(service)
        assert project.exit_code(service) == ExitCode.CONFIG_ERROR, log
        assert project.run_seconds(service) < JOIN, log
        assert "train | epoch" not in log  # Stopped before the first training step.
        peer = 1 - index  # Each worker names the difference from its own side.
        line = f"{field} differs: {service}:12345 has {values[index]}, {services[peer]}:12345 has {values[peer]}"
        assert f"launcher | {service}:12345: topology mismatch: {line}\n" in log
        # The verdict names the field and both workers, in each worker's own words.
        assert f"{service}: exited 2: launcher | {service}:12345: topology mismatch: {line}" in result.stdout
