import json

import pytest

from tests.conftest import free_port
from trainer.contract.cluster import from_template
from trainer.contract.settings import TrainingSettings
from trainer.launcher.digests import UNCOMPARED_COMMAND, Digest, packages_digest, project_digest
from trainer.launcher.rendezvous import Fingerprint, Server, differences, fetch, rendezvous_port

NEW_FIELDS = ("checkpoint_dir", "variables", "versions", "image", "command")


def fingerprint(hosts="worker-0,worker-1", index=0, *, user_settings=None, project=None, packages=None, **settings):
    fields = {name: settings.pop(name) for name in NEW_FIELDS if name in settings}
    return Fingerprint.of(
        from_template(hosts, index),
        TrainingSettings(**settings),
        user_settings=user_settings,
        project=project,
        packages=packages,
        **fields,
    )


def compare(mine, theirs, expected_index=1):
    return differences(mine, theirs, me="worker-0:12345", peer="worker-1:12345", expected_index=expected_index)


def test_identical_configurations_agree():
    assert compare(fingerprint(), fingerprint(index=1)) == []


def test_each_differing_field_is_named_with_both_values():
    assert compare(fingerprint(), fingerprint("worker-0,worker-1,worker-2", 1)) == [
        "worker count differs: worker-0:12345 has 2, worker-1:12345 has 3"
    ]
    assert compare(fingerprint(), fingerprint("worker-0,worker-1:2222", 1)) == [
        "port of worker-1 differs: worker-0:12345 has worker-1:12345, worker-1:12345 has worker-1:2222"
    ]
    assert compare(fingerprint(), fingerprint("worker-0,worker-9", 1)) == [
        "worker 1's host differs: worker-0:12345 has worker-1, worker-1:12345 has worker-9"
    ]
    assert compare(fingerprint(), fingerprint(index=1, per_worker_batch_size=32, seed=8)) == [
        "TRAIN_BATCH_SIZE differs: worker-0:12345 has 16, worker-1:12345 has 32",
        "TRAIN_SEED differs: worker-0:12345 has 7, worker-1:12345 has 8",
    ]


def test_a_peer_given_tf_config_in_another_form_is_named():
    # One worker told its TF_CONFIG has a `chief` (TF_CHIEF=1), the other not: no agreed leader.
    mine = Fingerprint.of(from_template("worker-0,worker-1", 0, chief=True), TrainingSettings())
    assert compare(mine, fingerprint(index=1)) == ["TF_CHIEF differs: worker-0:12345 has 1, worker-1:12345 has 0"]
    theirs = Fingerprint.of(from_template("worker-0,worker-1", 1, chief=True), TrainingSettings())
    assert compare(mine, theirs) == []


def test_a_peer_claiming_another_index_is_named():
    assert compare(fingerprint(), fingerprint(index=0)) == [
        "worker-1:12345 says it is worker 0 (TF_TASK_INDEX), but it is worker 1 in the cluster list"
    ]


def test_side_ports_are_shared_across_hosts_and_distinct_on_one_host():
    containers = from_template("worker-0,worker-1", 0)
    assert [rendezvous_port(containers, position, 12399) for position in (0, 1)] == [12399, 12399]
    loopback = from_template("127.0.0.1:1,127.0.0.1:2,127.0.0.2:3", 0)
    assert [rendezvous_port(loopback, position, 12399) for position in (0, 1, 2)] == [12399, 12400, 12399]


def test_the_accuracy_pass_mark_is_each_workers_own():
    assert compare(fingerprint(), fingerprint(index=1, min_accuracy=0.9)) == []


# -- what else must be the same: the user's settings, the project's files, the packages ----------


def test_a_user_setting_that_differs_is_named_with_both_values():
    mine = fingerprint(user_settings={"LEARNING_RATE": "0.1", "OPTIMIZER": "adam"})
    theirs = fingerprint(index=1, user_settings={"LEARNING_RATE": "0.2", "OPTIMIZER": "adam"})
    assert compare(mine, theirs) == [
        "user setting LEARNING_RATE differs: worker-0:12345 has 0.1, worker-1:12345 has 0.2"
    ]


def test_a_user_setting_unset_on_one_worker_shows_as_unset():
    mine = fingerprint(user_settings={"DATA_URL": "s3://bucket/set"})
    theirs = fingerprint(index=1, user_settings={"DATA_URL": None})
    assert compare(mine, theirs) == [
        "user setting DATA_URL differs: worker-0:12345 has s3://bucket/set, worker-1:12345 has (unset)"
    ]
    assert compare(fingerprint(user_settings={"DATA_URL": None}), theirs) == []


def test_a_user_setting_that_only_one_worker_compares_is_named_too():
    theirs = fingerprint(index=1, user_settings={"EXTRA": "1"})
    assert compare(fingerprint(), theirs) == [
        "user setting EXTRA differs: worker-0:12345 has (not in its TFCLUSTER_USER_ENV), worker-1:12345 has 1"
    ]


def test_a_long_or_unprintable_user_setting_is_shown_on_one_line():
    mine = fingerprint(user_settings={"PROMPT": "line one\nline two"})
    theirs = fingerprint(index=1, user_settings={"PROMPT": "x" * 100})
    assert compare(mine, theirs) == [
        f"user setting PROMPT differs: worker-0:12345 has 'line one\\nline two', worker-1:12345 has '{'x' * 56}..."
    ]


def project_of(tmp_path, name: str, files: dict[str, str]) -> Digest:
    root = tmp_path / name
    root.mkdir()
    for path, text in files.items():
        (root / path).write_text(text)
    return project_digest(str(root))


@pytest.mark.parametrize(
    "theirs",
    [{"train.py": "rate = 0.2\n"}, {"train.py": "rate = 0.1\n", "extra.py": ""}],
    ids=["a file changed", "a file added"],
)
def test_different_project_files_are_named_with_both_digests(tmp_path, theirs):
    ours = project_of(tmp_path, "ours", {"train.py": "rate = 0.1\n"})
    its = project_of(tmp_path, "theirs", theirs)
    found = compare(fingerprint(project=ours), fingerprint(index=1, project=its))
    assert found == [
        f"project files differ: worker-0:12345 has {ours}, worker-1:12345 has {its} (different code on the workers)"
    ]
    assert str(ours) == f"{ours.sha256[:12]} (1 files, 11 bytes)"
    same = project_of(tmp_path, "same", {"train.py": "rate = 0.1\n"})
    assert compare(fingerprint(project=ours), fingerprint(index=1, project=same)) == []


def test_a_worker_without_the_project_is_named():
    ours = Digest(sha256="3f2a" * 16, summary="3 files, 1200 bytes")
    assert compare(fingerprint(project=ours), fingerprint(index=1)) == [
        "project files differ: worker-0:12345 has 3f2a3f2a3f2a (3 files, 1200 bytes), "
        "worker-1:12345 has no project (no TFCLUSTER_PROJECT_DIR) (different code on the workers)"
    ]


def test_different_installed_packages_are_named():
    ours = packages_digest(["numpy==1.26.4", "tensorflow==2.16.1"])
    its = packages_digest(["numpy==1.26.4", "tensorflow==2.16.1", "tqdm==4.66.0"])
    assert compare(fingerprint(packages=ours), fingerprint(index=1, packages=its)) == [
        f"installed packages differ: worker-0:12345 has {ours.sha256[:12]} (2 packages), "
        f"worker-1:12345 has {its.sha256[:12]} (3 packages) (workers built from different images or requirements)"
    ]
    assert compare(fingerprint(packages=ours), fingerprint(index=1, packages=ours)) == []


def test_the_fingerprint_travels_whole_as_json():
    whole = fingerprint(
        user_settings={"LEARNING_RATE": "0.1", "UNSET": None},
        project=Digest(sha256="ab" * 32, summary="1 files, 11 bytes"),
        packages=packages_digest(["numpy==1.26.4"]),
    )
    assert Fingerprint.from_record(json.loads(json.dumps(whole.to_record()))) == whole
    assert Fingerprint.from_record(json.loads(json.dumps(fingerprint().to_record()))) == fingerprint()


# -- the final state, and who has seen it --------------------------------------------------------


def test_the_server_counts_who_has_seen_its_current_state_only():
    port = free_port()
    server = Server(fingerprint(), port)
    try:
        server.set_state("running")
        fetch("127.0.0.1", port, me=1, timeout=2)
        assert server.wait_until_seen({1}, 2)  # Counted once the answer is out, a moment after the peer has it.
        # Having seen it run tells a peer nothing of how it ended.
        server.set_state("exited 0")
        assert not server.wait_until_seen({1}, 0)
        assert fetch("127.0.0.1", port, me=1, timeout=2)[1] == "exited 0"
        assert server.wait_until_seen({1}, 2)
        assert not server.wait_until_seen({1, 2}, 0)
    finally:
        server.close()


def test_two_long_user_settings_alike_at_first_differ_all_the_same():
    mine = fingerprint(user_settings={"CONFIG": "x" * 100 + "1"})
    theirs = fingerprint(index=1, user_settings={"CONFIG": "x" * 100 + "2"})
    assert compare(mine, theirs) == [
        f"user setting CONFIG differs: worker-0:12345 has '{'x' * 56}..., worker-1:12345 has '{'x' * 56}..."
    ]


# -- what else changes the computation: checkpoints, variables, versions, image, command -----------


def test_a_checkpoint_directory_that_differs_is_named_with_both_values():
    mine = fingerprint(checkpoint_dir="/checkpoints")
    assert compare(mine, fingerprint(index=1, checkpoint_dir="")) == [
        "TF_CHECKPOINT_DIR differs: worker-0:12345 has /checkpoints, worker-1:12345 has (empty: no checkpoints)"
    ]
    assert compare(mine, fingerprint(index=1, checkpoint_dir="/elsewhere")) == [
        "TF_CHECKPOINT_DIR differs: worker-0:12345 has /checkpoints, worker-1:12345 has /elsewhere"
    ]
    assert compare(mine, fingerprint(index=1, checkpoint_dir="/checkpoints")) == []


def test_a_computation_variable_set_on_one_worker_or_to_another_value_is_named():
    mine = fingerprint(variables={"TF_USE_LEGACY_KERAS": "1", "PYTHONHASHSEED": "0"})
    theirs = fingerprint(index=1, variables={"PYTHONHASHSEED": "1", "TF_ENABLE_ONEDNN_OPTS": "0"})
    assert compare(mine, theirs) == [
        "TF_USE_LEGACY_KERAS differs: worker-0:12345 has 1, worker-1:12345 has (unset)",
        "PYTHONHASHSEED differs: worker-0:12345 has 0, worker-1:12345 has 1",
        "TF_ENABLE_ONEDNN_OPTS differs: worker-0:12345 has (unset), worker-1:12345 has 0",
    ]
    assert compare(mine, fingerprint(index=1, variables={"PYTHONHASHSEED": "0", "TF_USE_LEGACY_KERAS": "1"})) == []


VERSIONS = {"Python": "3.11.2", "tensorflow": None, "tensorflow-cpu": "2.21.0", "keras": "3.15.1", "tf-keras": "2.21.0"}


def test_versions_of_python_tensorflow_and_keras_are_named_plainly():
    theirs = {**VERSIONS, "Python": "3.12.1", "tensorflow-cpu": "2.20.0", "tf-keras": None}
    assert compare(fingerprint(versions=VERSIONS), fingerprint(index=1, versions=theirs)) == [
        "Python differs: worker-0:12345 has 3.11.2, worker-1:12345 has 3.12.1",
        "tensorflow-cpu differs: worker-0:12345 has 2.21.0, worker-1:12345 has 2.20.0",
        "tf-keras differs: worker-0:12345 has 2.21.0, worker-1:12345 has (not installed)",
    ]
    assert compare(fingerprint(versions=VERSIONS), fingerprint(index=1, versions=dict(VERSIONS))) == []


def test_a_different_image_is_named_with_both_digests():
    ours = Digest(sha256="1a" * 32, summary="trainer code 60 files, 250000 bytes; Debian GNU/Linux 12 (bookworm) 12.11")
    its = Digest(sha256="2b" * 32, summary="trainer code 61 files, 250100 bytes; Debian GNU/Linux 12 (bookworm) 12.11")
    assert compare(fingerprint(image=ours), fingerprint(index=1, image=its)) == [
        f"image differs: worker-0:12345 has 1a1a1a1a1a1a ({ours.summary}), "
        f"worker-1:12345 has 2b2b2b2b2b2b ({its.summary}) (workers run different images)"
    ]
    assert compare(fingerprint(image=ours), fingerprint(index=1, image=ours)) == []


def test_a_different_training_command_is_named_and_one_worker_cannot_opt_out_alone():
    ours = Digest(sha256="3c" * 32, summary="3 words")
    its = Digest(sha256="4d" * 32, summary="2 words, 1 file it names")
    suffix = "(another command, or another version of a file it names)"
    assert compare(fingerprint(command=ours), fingerprint(index=1, command=its)) == [
        f"training command differs: worker-0:12345 has 3c3c3c3c3c3c (3 words), "
        f"worker-1:12345 has 4d4d4d4d4d4d (2 words, 1 file it names) {suffix}"
    ]
    assert compare(fingerprint(command=ours), fingerprint(index=1, command=UNCOMPARED_COMMAND)) == [
        f"training command differs: worker-0:12345 has 3c3c3c3c3c3c (3 words), "
        f"worker-1:12345 has (not compared: TFCLUSTER_COMPARE_COMMAND=0) {suffix}"
    ]
    uncompared = fingerprint(command=UNCOMPARED_COMMAND)
    assert compare(uncompared, fingerprint(index=1, command=UNCOMPARED_COMMAND)) == []


def everything(index=0):
    return fingerprint(
        index=index,
        checkpoint_dir="/checkpoints",
        variables={"TF_USE_LEGACY_KERAS": "1"},
        versions=VERSIONS,
        image=Digest(sha256="1a" * 32, summary="trainer code 60 files, 250000 bytes; Debian"),
        command=Digest(sha256="3c" * 32, summary="3 words"),
    )


def test_every_new_field_travels_whole_as_json():
    whole = everything()
    assert Fingerprint.from_record(json.loads(json.dumps(whole.to_record()))) == whole


def test_a_record_of_an_older_launcher_parses_and_differs_on_what_it_did_not_report():
    older = everything(index=1).to_record()
    for key in NEW_FIELDS:
        del older[key]
    not_reported = "(not reported: another version of the launcher)"
    assert compare(everything(), Fingerprint.from_record(older)) == [
        f"TF_CHECKPOINT_DIR differs: worker-0:12345 has /checkpoints, worker-1:12345 has {not_reported}",
        "TF_USE_LEGACY_KERAS differs: worker-0:12345 has 1, worker-1:12345 has (unset)",
        *(
            f"{name} differs: worker-0:12345 has {value or '(not installed)'}, worker-1:12345 has {not_reported}"
            for name, value in VERSIONS.items()
        ),
        f"image differs: worker-0:12345 has 1a1a1a1a1a1a (trainer code 60 files, 250000 bytes; Debian), "
        f"worker-1:12345 has {not_reported} (workers run different images)",
        f"training command differs: worker-0:12345 has 3c3c3c3c3c3c (3 words), worker-1:12345 has {not_reported} "
        "(another command, or another version of a file it names)",
    ]
