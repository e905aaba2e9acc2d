"""The examples are third-party plugins, installed the way a user installs one.

``make test`` installs only ``plugins/*``. When an example's distribution is not
installed, it is pip-installed from its folder into a temporary directory put on
``sys.path`` for this session, so its entry point is found like any other. This runs
when pytest loads this file, before a test asks vlreg for its plugins.
"""

import atexit
import importlib
import importlib.metadata
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: distribution -> its folder beside this file
EXAMPLES = {"vlreg-vipllava-example": Path(__file__).parent / "vipllava",
            "vlreg-streams-example": Path(__file__).parent / "streams"}


def _install(distribution: str, folder: Path) -> None:
    try:
        importlib.metadata.distribution(distribution)
        return
    except importlib.metadata.PackageNotFoundError:
        pass
    target = tempfile.mkdtemp(prefix=f"{distribution}-")
    atexit.register(shutil.rmtree, target, ignore_errors=True)
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target, str(folder)],
        capture_output=True, text=True,
    )
    if installed.returncode != 0:
        raise RuntimeError(f"could not install {folder} for its tests:\n{installed.stderr}")
    sys.path.insert(0, target)
    importlib.invalidate_caches()


for _distribution, _folder in EXAMPLES.items():
    _install(_distribution, _folder)
