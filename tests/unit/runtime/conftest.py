"""What the runtime's unit tests share: a stand-in for TensorFlow, which the host does not have."""

import textwrap

import pytest

# The modules whose calls reach the cluster (trainer/observer/gate.py), each method saying it was reached.
STAND_IN = {
    "tensorflow/__init__.py": "",
    "tensorflow/python/__init__.py": "",
    "tensorflow/python/eager/__init__.py": "",
    "tensorflow/python/training/__init__.py": "",
    "tensorflow/python/eager/context.py": """
        class Context:
            def enable_collective_ops(self, server_def):
                print("reached enable_collective_ops", flush=True)

            def set_server_def(self, server_def, keep_alive_secs=600):
                print("reached set_server_def", flush=True)

            def update_server_def(self, server_def, keep_alive_secs=600):
                print("reached update_server_def", flush=True)

            def executing_eagerly(self):
                return True
    """,
    "tensorflow/python/training/server_lib.py": """
        class Server:
            def __init__(self, server_or_cluster_def, job_name=None):
                print("reached Server", flush=True)
    """,
}


@pytest.fixture
def stand_in_tensorflow(tmp_path):
    """A folder to put on PYTHONPATH: `tensorflow`, with only STAND_IN's modules."""
    folder = tmp_path / "stand-in"
    for name, text in STAND_IN.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text))
    return folder
