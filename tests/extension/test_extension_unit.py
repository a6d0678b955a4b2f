"""The extension's own logic under Node's test runner, and web-ext lint on the Firefox build.

Both run the real tools (`node --test`, the web-ext pinned in extension/package-lock.json) so
`make test` covers them; under CI=true a missing node or web-ext fails instead of skipping.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from support import require

ROOT = Path(__file__).parents[2]
EXTENSION = ROOT / "extension"
WEB_EXT = EXTENSION / "node_modules" / ".bin" / "web-ext"


def test_node_unit_tests_pass():
    node = shutil.which("node")
    require(node, "node is not installed (Debian package 'nodejs')")
    done = subprocess.run(
        [node, "--test", "test/"], cwd=EXTENSION, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    passed = re.search(r"^# pass (\d+)$", done.stdout, re.MULTILINE)
    failed = re.search(r"^# fail (\d+)$", done.stdout, re.MULTILINE)
    assert passed and int(passed.group(1)) >= 20 and failed and failed.group(1) == "0"


def test_builds_for_both_browsers_and_firefox_build_passes_web_ext_lint(tmp_path):
    require(WEB_EXT.exists(), "web-ext is not installed (make test runs npm ci in extension/)")
    subprocess.run(
        [sys.executable, str(EXTENSION / "build.py"), str(tmp_path)], check=True, timeout=60
    )
    for browser in ("chromium", "firefox"):
        assert (tmp_path / f"marks-extension-{browser}.zip").stat().st_size > 1000
    chromium = json.loads((tmp_path / "extension-chromium" / "manifest.json").read_text())
    firefox = json.loads((tmp_path / "extension-firefox" / "manifest.json").read_text())
    assert chromium["background"] == {"service_worker": "background.js", "type": "module"}
    assert firefox["background"]["scripts"] == ["background.js"]
    assert "browser_specific_settings" not in chromium
    lint = subprocess.run(
        [
            str(WEB_EXT),
            "lint",
            "--source-dir",
            str(tmp_path / "extension-firefox"),
            "--self-hosted",
            "--warnings-as-errors",
            "--output",
            "json",
            "--no-config-discovery",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    report = json.loads(lint.stdout[lint.stdout.index("{") :])
    assert lint.returncode == 0, report
    assert report["summary"] == {"errors": 0, "notices": 0, "warnings": 0}
