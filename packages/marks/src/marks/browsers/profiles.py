"""Finding every profile of every browser under a home directory (tests pass a fake home).

Chromium family: the profile directories `Default` and `Profile N`, named by `Local State`
(`profile.info_cache`); the default is the one the browser opens (`profile.last_used`, else
`Default`). Firefox: `profiles.ini`, whose paths are relative to it or absolute; an `[Install...]`
section's `Default=` names the profile that installation opens, and wins over `Default=1`. Safari:
one set of files.
"""

import configparser
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

import msgspec

from marks.browsers.paths import BROWSERS, FAMILY, LOCATIONS

_PROFILE_DIR = re.compile(r"Default|Profile \d+")


class Profile(msgspec.Struct, kw_only=True):
    """What `browser list` shows for one profile."""

    browser: str
    name: str
    path: str
    default: bool = False
    bookmarks: int | None = None  # None when not counted, or when the profile cannot be read
    error: str | None = None


def find(home: Path | str | None = None, browsers: Iterable[str] = BROWSERS) -> list[Profile]:
    """Every profile of the browsers asked for, in table order, each path once."""
    home = Path(home) if home is not None else Path.home()
    wanted = set(browsers)
    found: list[Profile] = []
    seen: set[str] = set()
    for location in LOCATIONS:
        if location.browser not in wanted:
            continue
        base = home / location.path
        if not base.is_dir():
            continue
        family = FAMILY[location.browser]
        if family == "chromium":
            candidates = _chromium(location.browser, base)
        elif family == "firefox":
            candidates = _firefox(base)
        else:
            candidates = [Profile(browser="safari", name="Safari", path=str(base), default=True)]
        for profile in candidates:
            profile.browser = location.browser
            real = os.path.realpath(profile.path)
            if real not in seen:
                seen.add(real)
                found.append(profile)
    return found


def _chromium(browser: str, base: Path) -> list[Profile]:
    names: dict[str, str] = {}
    last_used = ""
    try:
        state = json.loads((base / "Local State").read_text(encoding="utf-8"))
        section = state.get("profile", {}) if isinstance(state, dict) else {}
        for directory, info in (section.get("info_cache") or {}).items():
            if isinstance(info, dict) and isinstance(info.get("name"), str):
                names[directory] = info["name"]
        if isinstance(section.get("last_used"), str):
            last_used = section["last_used"]
    except (OSError, ValueError, AttributeError):
        pass  # no or broken Local State: the directories alone still name the profiles
    directories = set(names)
    directories.update(entry.name for entry in base.iterdir() if _PROFILE_DIR.fullmatch(entry.name))
    present = sorted(
        (d for d in directories if (base / d).is_dir()),
        key=lambda d: (d != "Default", int(d.split()[-1]) if d.split()[-1].isdigit() else 0, d),
    )
    default = last_used if last_used in present else "Default"
    return [
        Profile(
            browser=browser,
            name=names.get(directory, directory),
            path=str(base / directory),
            default=directory == default,
        )
        for directory in present
    ]


class _CaseSensitiveParser(configparser.ConfigParser):
    """Keys are case-sensitive in Firefox's profiles.ini (ConfigParser lower-cases them)."""

    def optionxform(self, optionstr: str) -> str:
        return optionstr


def _firefox(base: Path) -> list[Profile]:
    ini = _CaseSensitiveParser(interpolation=None, strict=False)
    try:
        ini.read(base / "profiles.ini", encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return []
    installs = {
        ini[section].get("Default", "").strip()
        for section in ini.sections()
        if section.startswith("Install")
    } - {""}
    profiles = []
    for section in ini.sections():
        if not section.startswith("Profile"):
            continue
        entry = ini[section]
        raw = entry.get("Path", "").strip()
        if not raw:
            continue
        relative = entry.get("IsRelative", "1").strip() != "0"
        path = base / raw if relative else Path(raw)
        if not path.is_dir():
            continue
        default = raw in installs if installs else entry.get("Default", "0").strip() == "1"
        profiles.append(
            Profile(
                browser="firefox",
                name=entry.get("Name", "").strip() or path.name,
                path=str(path),
                default=default,
            )
        )
    return profiles
