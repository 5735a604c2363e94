"""The files of a checkout, for the scripts that read the repository itself (layers.py, design_check.py)."""
import os
import subprocess


def repo_files(root):
    """Paths relative to `root`: what git tracks there, or every file below it outside a git checkout."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout
        return out.split()
    except (OSError, subprocess.CalledProcessError):
        return [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs]
