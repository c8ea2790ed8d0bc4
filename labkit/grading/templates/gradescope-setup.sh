#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image; the zip is
# unpacked in /autograder/source. It installs Python, bubblewrap (the sandbox student
# code runs in) and the lab's wheel, and makes the hidden checks readable by root only.
set -euo pipefail
source_dir="${LABKIT_AUTOGRADER_ROOT:-/autograder}/source"

apt-get update
apt-get install -y --no-install-recommends python3 python3-venv bubblewrap
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "labkit needs Python 3.11 or later: choose an Ubuntu 24.04 base image" >&2
    exit 1
fi
python3 -m venv /opt/labkit
/opt/labkit/bin/pip install "$source_dir"/labkit-*.whl
# Student code runs as another uid and in bubblewrap (which shows it none of this).
chmod -R go-rwx "$source_dir"
