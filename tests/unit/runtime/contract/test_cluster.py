import json

import pytest

from trainer.contract import cluster as cluster_config
from trainer.contract.cluster import Cluster


def test_template_gives_every_worker_the_same_cluster_and_its_own_index():
    configs = [cluster_config.from_template("worker-0,worker-1", index).tf_config() for index in (0, 1)]
    assert configs[0]["cluster"] == configs[1]["cluster"] == {"worker": ["worker-0:12345", "worker-1:12345"]}
    assert [config["task"] for config in configs] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]


def test_template_entry_may_carry_its_own_port():
    cluster = cluster_config.from_template("a:2222, b", 1, default_port=3333)
    assert cluster.workers == ("a:2222", "b:3333")
    assert cluster.host == "b"


def test_tf_config_round_trips():
    cluster = cluster_config.from_template("worker-0,worker-1,10.0.0.7", 2)
    assert cluster_config.from_tf_config(cluster.tf_config_json()) == cluster


def test_from_env_prefers_a_full_tf_config():
    tf_config = json.dumps({"cluster": {"worker": ["h1:1", "h2:2"]}, "task": {"type": "worker", "index": 1}})
    cluster = cluster_config.from_env({"TF_CONFIG": tf_config, "TF_WORKER_HOSTS": "x", "TF_TASK_INDEX": "0"})
    assert cluster == Cluster(workers=("h1:1", "h2:2"), index=1)


def test_from_env_reads_the_template():
    environ = {"TF_WORKER_HOSTS": "worker-0,worker-1", "TF_WORKER_PORT": "2222", "TF_TASK_INDEX": "1"}
    assert cluster_config.from_env(environ) == Cluster(workers=("worker-0:2222", "worker-1:2222"), index=1)


def test_from_env_with_tf_chief_gives_tfjobs_form_the_first_host_the_chief():
    environ = {"TF_WORKER_HOSTS": "worker-0,worker-1,worker-2", "TF_CHIEF": "1"}
    configs = [cluster_config.from_env({**environ, "TF_TASK_INDEX": str(index)}).tf_config() for index in range(3)]
    assert {json.dumps(config["cluster"]) for config in configs} == {
        json.dumps({"chief": ["worker-0:12345"], "worker": ["worker-1:12345", "worker-2:12345"]})
    }
    assert [config["task"] for config in configs] == [
        {"type": "chief", "index": 0},
        {"type": "worker", "index": 0},
        {"type": "worker", "index": 1},
    ]
    assert cluster_config.from_env({**environ, "TF_CHIEF": "0", "TF_TASK_INDEX": "0"}).tf_config()["task"] == {
        "type": "worker",
        "index": 0,
    }


def test_a_tf_chief_other_than_0_or_1_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"^`TF_CHIEF` \('yes'\) must be 1 \(the first host is the `chief`\) or 0$"):
        cluster_config.from_env({"TF_WORKER_HOSTS": "worker-0", "TF_TASK_INDEX": "0", "TF_CHIEF": "yes"})


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ({"TF_TASK_INDEX": "1"}, 1),
        ({"TF_TASK_SLOT": "1"}, 0),  # Swarm's {{.Task.Slot}} counts from 1.
        ({"TF_TASK_SLOT": "2"}, 1),
        ({"JOB_COMPLETION_INDEX": "1"}, 1),  # A Kubernetes Indexed Job's pods count from 0.
        ({"TF_TASK_INDEX": "0", "TF_TASK_SLOT": "2", "JOB_COMPLETION_INDEX": "1"}, 0),  # The explicit one wins.
    ],
)
def test_the_index_comes_from_compose_swarm_or_kubernetes(source, expected):
    cluster = cluster_config.from_env({"TF_WORKER_HOSTS": "w-a,w-b", **source})
    assert cluster.index == expected
    assert cluster.tf_config()["task"] == {"type": "worker", "index": expected}


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"TF_CONFIG": "{not json"}, "'{not json'"),
        ({"TF_CONFIG": "[1, 2]"}, "[1, 2]"),
        ({"TF_CONFIG": '{"cluster": {"worker": []}, "task": {"index": 0}}'}, "no workers"),
        ({"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}, "task": {"index": 3}}'}, "(3) must be in [0, 1)"),
        ({"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}, "task": {"index": "0"}}'}, "('0') must be an integer"),
        ({"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}, "task": {"index": true}}'}, "(True) must be an integer"),
        ({"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}'}, "'chief'"),
        ({"TF_CONFIG": '{"cluster": {"worker": ["a:1"], "ps": ["b:2"]}, "task": {"index": 0}}'}, "['ps']"),
        ({"TF_CONFIG": '{"cluster": {"worker": "a:1"}, "task": {"index": 0}}'}, "'a:1'"),
        ({"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}}'}, "no `task`"),
        ({"TF_CONFIG": '{"cluster": {"worker": ["a:1", "a:1"]}, "task": {"index": 0}}'}, "`a:1` appears twice"),
        ({"TF_WORKER_HOSTS": "a,b", "TF_TASK_INDEX": "2"}, "`TF_TASK_INDEX` (2) must be in [0, 2)"),
        ({"TF_WORKER_HOSTS": "a,b", "TF_TASK_INDEX": "-1"}, "('-1') must be a non-negative integer"),
        ({"TF_WORKER_HOSTS": "a,b", "TF_TASK_INDEX": "one"}, "('one')"),
        ({"TF_WORKER_HOSTS": "a,b"}, "no task index: set `TF_TASK_INDEX`"),
        ({"TF_WORKER_HOSTS": "a,b", "TF_TASK_SLOT": "0"}, "`TF_TASK_SLOT` ('0') counts from 1"),
        ({"TF_WORKER_HOSTS": "a,b", "TF_TASK_SLOT": "3"}, "`TF_TASK_SLOT - 1` (2) must be in [0, 2)"),
        ({"TF_WORKER_HOSTS": "a,b", "JOB_COMPLETION_INDEX": "x"}, "`JOB_COMPLETION_INDEX` ('x')"),
        ({"TF_WORKER_HOSTS": "", "TF_TASK_INDEX": "0"}, "('') is empty"),
        ({"TF_WORKER_HOSTS": "a,,b", "TF_TASK_INDEX": "0"}, "('a,,b') has an empty entry"),
        ({"TF_WORKER_HOSTS": "a,a", "TF_TASK_INDEX": "0"}, "`a:12345` appears twice"),
        ({"TF_WORKER_HOSTS": "a:1,a:1", "TF_TASK_INDEX": "0"}, "`a:1` appears twice"),
        ({"TF_WORKER_HOSTS": "a:99999", "TF_TASK_INDEX": "0"}, "port `99999`"),
        ({"TF_WORKER_HOSTS": "a:", "TF_TASK_INDEX": "0"}, "`a:`"),
        ({"TF_WORKER_HOSTS": "a:x", "TF_TASK_INDEX": "0"}, "port `x`"),
        ({"TF_WORKER_HOSTS": "bad_host!", "TF_TASK_INDEX": "0"}, "`bad_host!:12345` is not a valid `host:port`"),
        ({"TF_WORKER_HOSTS": "a", "TF_WORKER_PORT": "http", "TF_TASK_INDEX": "0"}, "`TF_WORKER_PORT` ('http')"),
        ({}, "set either TF_CONFIG or TF_WORKER_HOSTS"),
    ],
)
def test_bad_cluster_input_names_the_bad_value(environ, named):
    with pytest.raises(ValueError) as raised:
        cluster_config.from_env(environ)
    assert named in str(raised.value)
    assert "\n" not in str(raised.value)


TFJOB = {"chief": ["trainer-chief-0:2222"], "worker": ["trainer-worker-0:2222", "trainer-worker-1:2222"]}


@pytest.mark.parametrize(
    ("task", "index", "host"),
    [({"type": "chief", "index": 0}, 0, "trainer-chief-0"), ({"type": "worker", "index": 1}, 2, "trainer-worker-1")],
)
def test_a_tf_config_with_a_chief_as_tfjob_writes_it_is_one_cluster_with_the_chief_first(task, index, host):
    cluster = cluster_config.from_tf_config(json.dumps({"cluster": TFJOB, "task": task}))
    assert cluster.workers == ("trainer-chief-0:2222", "trainer-worker-0:2222", "trainer-worker-1:2222")
    assert (cluster.index, cluster.host, cluster.size, cluster.chief) == (index, host, 3, True)
    # Given back to the program in the form it came in.
    assert cluster.tf_config() == {"cluster": TFJOB, "task": task}
    assert cluster_config.from_tf_config(cluster.tf_config_json()) == cluster


def test_a_chief_alone_is_a_cluster_of_one():
    cluster = cluster_config.from_tf_config('{"cluster": {"chief": ["c:1"]}, "task": {"type": "chief", "index": 0}}')
    assert (cluster.workers, cluster.index, cluster.task) == (("c:1",), 0, ("chief", 0))


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"cluster": {**TFJOB, "evaluator": ["e:1"]}, "task": {"type": "chief", "index": 0}}, "['evaluator']: Multi"),
        (
            {"cluster": {**TFJOB, "ps": ["p:1"]}, "task": {"type": "worker", "index": 0}},
            "`ps` is ParameterServerStrategy's",
        ),
        (
            {"cluster": TFJOB, "task": {"type": "evaluator", "index": 0}},
            "task type ('evaluator') must be `chief` or `worker`",
        ),
        ({"cluster": TFJOB, "task": {"type": "chief", "index": 1}}, "the chief (1) must be 0"),
        ({"cluster": TFJOB, "task": {"type": "worker", "index": 2}}, "(2) must be in [0, 2) for the cluster's workers"),
        ({"cluster": {**TFJOB, "chief": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}}, "must list one task"),
        (
            {"cluster": {**TFJOB, "chief": "a:1"}, "task": {"type": "chief", "index": 0}},
            "`cluster.chief` must be a list",
        ),
    ],
)
def test_what_multiworkermirroredstrategy_has_no_use_for_is_refused_in_one_line(config, named):
    with pytest.raises(ValueError) as raised:
        cluster_config.from_tf_config(json.dumps(config))
    assert named in str(raised.value)
    assert "\n" not in str(raised.value)
