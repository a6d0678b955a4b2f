"""`make extension`: the Chromium and Firefox builds of the extension, as folders and zip files.

One source tree (`src/`); the Firefox build merges `src/firefox.json` into the manifest (a
background script instead of a service worker, and its add-on id). Standard library only.
"""

import json
import shutil
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).parent
SOURCE = HERE / "src"
SKIP = {"firefox.json"}


def manifest(browser: str) -> dict:
    base = json.loads((SOURCE / "manifest.json").read_text())
    if browser == "firefox":
        base.update(json.loads((SOURCE / "firefox.json").read_text()))
        # Firefox asks for host permissions at run time anyway; it has no optional_host_permissions
        # before 128 and ignores the incognito/service-worker keys it does not know.
    return base


def build(browser: str, out: Path) -> Path:
    folder = out / f"extension-{browser}"
    shutil.rmtree(folder, ignore_errors=True)
    for path in sorted(SOURCE.rglob("*")):
        if path.is_file() and path.name not in SKIP and path.name != "manifest.json":
            target = folder / path.relative_to(SOURCE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    (folder / "manifest.json").write_text(json.dumps(manifest(browser), indent=2) + "\n")
    archive = out / f"marks-extension-{browser}.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                bundle.write(path, path.relative_to(folder).as_posix())
    return archive


def main(out: str = "dist") -> None:
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    for browser in ("chromium", "firefox"):
        print(build(browser, target))


if __name__ == "__main__":
    main(*sys.argv[1:])
