"""The layout's dependency rule (trainer/__init__.py) holds, and its check can say no."""

import ast
import os
import shutil
import subprocess
import sys

import grimp
import pytest

from tests.conftest import ROOT

LINT_IMPORTS = str(ROOT / ".venv" / "bin" / "lint-imports")


def test_the_shared_contract_imports_only_the_standard_library_and_itself():
    graph = grimp.build_graph("trainer", include_external_packages=True)
    outside = {
        f"{module} imports {imported}"
        for module in graph.find_descendants("trainer.contract") | {"trainer.contract"}
        for imported in graph.find_modules_directly_imported_by(module)
        if not imported.startswith("trainer.contract") and imported.split(".")[0] not in sys.stdlib_module_names
    }
    assert not outside


def lint_copy(tmp_path, module: str, line: str) -> subprocess.CompletedProcess:
    """`lint-imports` with the project's contracts on a copy of trainer/ and the host package
    (scripts/tfcluster/) whose `module` gained `line`."""
    ignored = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "trainer", tmp_path / "trainer", ignore=ignored)
    shutil.copytree(ROOT / "scripts" / "tfcluster", tmp_path / "scripts" / "tfcluster", ignore=ignored)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    target = tmp_path / module
    target.write_text(f"{line}\n{target.read_text()}")
    # As scripts/lint runs it: the host package is found in scripts/.
    environment = {**os.environ, "PYTHONPATH": f"{tmp_path / 'scripts'}:{tmp_path}"}
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=60
    )


def test_the_rule_holds_on_this_tree(tmp_path):
    result = lint_copy(tmp_path, "trainer/launcher/peers.py", "")
    assert result.returncode == 0, result.stdout
    assert "0 broken" in result.stdout


def test_a_launcher_module_that_imports_tensorflow_breaks_the_rule(tmp_path):
    result = lint_copy(tmp_path, "trainer/launcher/peers.py", "import tensorflow  # noqa")
    assert result.returncode == 1, result.stdout
    assert "never import TensorFlow or the Docker SDK BROKEN" in " ".join(result.stdout.split())
    assert "trainer.launcher.peers -> tensorflow" in result.stdout


def test_the_verifier_importing_the_training_loop_breaks_the_rule(tmp_path):
    result = lint_copy(tmp_path, "trainer/verifier/metrics.py", "from trainer.training import loop  # noqa")
    assert result.returncode == 1, result.stdout
    assert "trainer.verifier.metrics -> trainer.training.loop" in result.stdout


def test_the_contract_importing_a_role_breaks_the_rule(tmp_path):
    result = lint_copy(tmp_path, "trainer/contract/cluster.py", "import trainer.launcher.peers  # noqa")
    assert result.returncode == 1, result.stdout
    assert "trainer.contract.cluster -> trainer.launcher.peers" in result.stdout


def test_the_host_package_importing_a_runtime_role_breaks_the_rule(tmp_path):
    result = lint_copy(tmp_path, "scripts/tfcluster/cluster/plan.py", "import trainer.verifier.verdict  # noqa")
    assert result.returncode == 1, result.stdout
    assert "trainer.contract only BROKEN" in " ".join(result.stdout.split())
    assert "tfcluster.cluster.plan -> trainer.verifier.verdict" in result.stdout


def test_a_lower_layer_of_the_host_package_importing_a_command_breaks_the_rule(tmp_path):
    result = lint_copy(tmp_path, "scripts/tfcluster/project/layout.py", "import tfcluster.commands.run  # noqa")
    assert result.returncode == 1, result.stdout
    assert "your project, the set-up, images BROKEN" in " ".join(result.stdout.split())
    assert "tfcluster.project.layout -> tfcluster.commands.run" in result.stdout


def test_the_host_package_importing_yaml_breaks_the_rule(tmp_path):
    # scripts/run must work with nothing but python3: no third-party package, even a common one.
    result = lint_copy(tmp_path, "scripts/tfcluster/ci/junit.py", "import yaml  # noqa")
    assert result.returncode == 1, result.stdout
    assert "tfcluster.ci.junit -> yaml" in result.stdout


# Small enough to read in one sitting. A longer one must say why in its docstring, with these words.
LIMITS = {ast.FunctionDef: 60, ast.AsyncFunctionDef: 60, ast.ClassDef: 150}
EXCUSED = "longer than the house limit because"


def oversized(source: str) -> list[str]:
    """Each function or class of `source` over its limit and without an excuse, as `name (N lines)`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if type(node) not in LIMITS:
            continue
        length = node.end_lineno - node.lineno + 1
        if length > LIMITS[type(node)] and EXCUSED not in (ast.get_docstring(node) or ""):
            found.append(f"{node.name} ({length} lines)")
    return found


@pytest.mark.parametrize("package", ["trainer", "scripts/tfcluster"])
def test_no_function_or_class_is_too_long_to_read_in_one_sitting(package):
    found = {
        str(path.relative_to(ROOT)): oversized(path.read_text())
        for path in sorted((ROOT / package).rglob("*.py"))
        if oversized(path.read_text())
    }
    assert found == {}


def test_the_length_check_finds_long_functions_and_classes_and_takes_an_excuse():
    body = "    x = 1\n" * 60
    assert oversized(f"def long():\n{body}") == ["long (61 lines)"]
    assert oversized(f"def short():\n{body[10:]}") == []
    assert oversized("class Big:\n" + "    x = 1\n" * 150) == ["Big (151 lines)"]
    excused = f'def long():\n    """{EXCUSED} of X."""\n{body}'
    assert oversized(excused) == []


def test_every_test_module_has_a_name_of_its_own():
    """pytest imports test modules by their base name (the suite has no __init__.py files): two of one
    name, in different folders, stop the whole run at collection."""
    names: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}
