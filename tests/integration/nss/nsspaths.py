# SPDX-License-Identifier: BSD-3-Clause
"""Where the repository and the build under test are: the build is the folder of NSCACHE_BIN
(as the parent conftest uses), else <repo>/build; the module and test programs are in its
nss/ folder."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def build_dir():
    env = os.environ.get("NSCACHE_BIN")
    return Path(env).resolve().parent if env else REPO / "build"
