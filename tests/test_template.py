"""``vlreg new-plugin`` writes a plugin that installs and passes its own generated test.

End to end, once: written with vlreg-llava taken out (as ``VLREG_DISABLE_PLUGINS=llava``
leaves it), installed with pip in a fresh process, then its own pytest run and ``vlreg plugins``
in another. `tests/test_template_sources.py` proves skeletons of every real config load
and trace, in-process."""

import os
import subprocess
import sys
from importlib.util import find_spec

import pytest

from vlreg.cli import main
from vlreg.core.host import plugins
from vlreg.testing import build, registered

pytestmark = pytest.mark.heavy  # pip, the CLI and pytest, each in a process: started first under make test

pytest.importorskip("vlreg_llava", reason="the template is proven on a LLaVA checkpoint: install plugins/llava")


def test_a_generated_plugin_installs_and_passes_its_own_test(tmp_path, capsys):
    source = build("llava_interleave")
    with registered(None, replacing=[plugins.plugin_manager().get_plugin("llava")]):  # the family it will serve
        assert main(["new-plugin", "llava_copy", "--from", str(source), "--out", str(tmp_path)]) == 0
    assert "the skeleton serves nothing" not in capsys.readouterr().out
    env = {**os.environ, "VLREG_DISABLE_PLUGINS": "llava"}
    folder = tmp_path / "vlreg-llava-copy"
    assert (folder / "pyproject.toml").exists() and (folder / "vlreg_llava_copy" / "__init__.py").exists()
    # laid out as the built-in plugins are, the family one declaration
    assert sorted(path.name for path in (folder / "vlreg_llava_copy").glob("*.py")) == [
        "__init__.py", "checkpoints.py", "text.py", "vision.py"]
    assert [path.name for path in (folder / "tests").glob("*.py")] == ["test_conformance.py"]
    assert 'llava_copy = "vlreg_llava_copy:plugin"' in (folder / "pyproject.toml").read_text()

    # Named site-packages, as tests/test_examples.py does: nnsight's remote="local" keeps only
    # such folders importable while it deserializes, as a server keeps what is installed. Built
    # offline with the setuptools installed here where there is one, as that file does.
    target = tmp_path / "installed" / "site-packages"
    isolation = [] if find_spec("setuptools") is None else ["--no-build-isolation"]
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *isolation, "--target", str(target),
         str(folder)],
        capture_output=True, text=True, timeout=600,
    )
    assert installed.returncode == 0, installed.stderr
    env["PYTHONPATH"] = os.pathsep.join([str(target), env.get("PYTHONPATH", "")])

    # pytest on the plugin's tests, then `vlreg plugins`, in one process (one import of torch and the plugins)
    tested = subprocess.run(
        [sys.executable, "-c", TESTED_THEN_LISTED, str(folder / "tests")],
        env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )
    report, _, listed = tested.stdout.partition(END_OF_LISTING)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]
    assert "llava_copy (vlreg-llava-copy 0.1.0): families llava" in listed
    assert " passed" in report and "failed" not in report


END_OF_LISTING = "--- vlreg plugins ---"
#: pytest first: its plugins must load before nnsight is imported (anyio's fails on the ``save``
#: nnsight gives every object).
TESTED_THEN_LISTED = f"""
import sys
import pytest
failed = pytest.main(["-q", "-p", "no:cacheprovider", sys.argv[1]])
from vlreg.cli import main
print({END_OF_LISTING!r}, flush=True)
assert main(["plugins"]) == 0
sys.exit(failed)
"""
