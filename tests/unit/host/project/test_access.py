"""What the workers (uid 1000) cannot read of a project or data folder is refused on the host, in
one line naming the path, its mode and owner, and the fix (tfcluster/project/access.py)."""

import os
import stat

import pytest
from tfcluster import Cluster, Refusal
from tfcluster.project import access


@pytest.fixture
def project(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir(mode=0o755)
    (folder / "train.py").write_text("print('training')\n")
    (folder / "model").mkdir(mode=0o755)
    (folder / "model" / "main.py").write_text("")
    return folder


def refusal(**options) -> str:
    with pytest.raises(Refusal) as refused:
        Cluster(**options).plan()
    return str(refused.value)


@pytest.mark.skipif(os.geteuid() == 1000, reason="the workers' own user reads its 0700 folders")
def test_a_folder_of_mode_0700_as_mktemp_makes_is_refused_naming_path_mode_owner_and_fix(project):
    project.chmod(0o700)
    message = refusal(project=str(project))
    assert message == (
        f"--project {project}: a folder of mode 0700 owned by {_owner(project)}, which the workers (uid 1000) "
        f"cannot read; make it readable to them: chmod a+rX {project}"
    )
    assert "\n" not in message


def test_the_script_a_command_names_and_the_folders_on_its_way_are_checked(project):
    (project / "model").chmod(0o700 if os.geteuid() != 1000 else 0o077)
    message = refusal(project=str(project), command="python model/main.py")
    assert message.startswith(f"--project {project}: {project / 'model'}, a folder of mode ")
    (project / "model").chmod(0o755)
    (project / "train.py").chmod(0o600 if os.geteuid() != 1000 else 0o044)
    assert refusal(project=str(project)).startswith(f"--project {project}: {project / 'train.py'}, a file of mode ")


def test_a_data_folder_the_workers_cannot_enter_is_refused(project, tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o711)  # Enterable, not listable.
    assert "--data" in refusal(project=str(project), data=str(data))


def test_what_the_run_does_not_need_may_be_private(project):
    # A secret beside the code is not the workers' to read, and need not be.
    (project / ".env").write_text("TOKEN=x\n")
    (project / ".env").chmod(0o600)
    assert Cluster(project=str(project)).plan().project.directory == str(project)


def test_the_workers_uid_and_gid_read_by_the_owners_and_the_groups_bits():
    def info(mode, uid, gid):
        return os.stat_result((stat.S_IFDIR | mode, 0, 0, 0, uid, gid, 0, 0, 0, 0))

    assert access.can_read(info(0o700, 1000, 5))
    assert not access.can_read(info(0o700, 0, 1000))
    assert access.can_read(info(0o750, 0, 1000))
    assert not access.can_read(info(0o770, 0, 0))
    assert access.can_read(info(0o705, 0, 0))


def test_a_baked_project_is_not_held_to_its_modes_on_disk(project):
    # Its files go into the image readable to all (tfcluster/project/baking.py).
    project.chmod(0o700)
    (project / "train.py").chmod(0o600)
    assert Cluster(project=str(project), bake=True).plan().bakes


def _owner(path) -> str:
    import grp
    import pwd

    info = path.stat()
    return f"{pwd.getpwuid(info.st_uid).pw_name}:{grp.getgrgid(info.st_gid).gr_name}"
