"""Where each browser keeps its profiles, as one table: a new browser or platform is one row.

Paths are relative to the home directory (`AppData/...` on Windows is under `%USERPROFILE%`). The
finder looks at every row whatever the running system, so a home copied from another machine, or
mounted from it, is found too; rows of other platforms simply do not exist on disk.
"""

from typing import NamedTuple

BROWSERS = ("chrome", "chromium", "edge", "brave", "firefox", "safari")
FAMILY = {
    "chrome": "chromium",
    "chromium": "chromium",
    "edge": "chromium",
    "brave": "chromium",
    "firefox": "firefox",
    "safari": "safari",
}


class Location(NamedTuple):
    browser: str
    platform: str  # linux, macos, windows
    variant: str  # how or which channel: "", "snap", "flatpak", "xdg", "beta", "dev", ...
    path: str  # relative to the home directory: a Chromium user-data dir, Firefox's
    # profiles.ini directory, or Safari's Library/Safari


LOCATIONS: tuple[Location, ...] = (
    # Chromium family: a user-data directory holding `Local State` and `Default`, `Profile N`.
    Location("chrome", "linux", "", ".config/google-chrome"),
    Location("chrome", "linux", "flatpak", ".var/app/com.google.Chrome/config/google-chrome"),
    Location("chrome", "linux", "beta", ".config/google-chrome-beta"),
    Location("chrome", "linux", "unstable", ".config/google-chrome-unstable"),
    Location("chrome", "macos", "canary", "Library/Application Support/Google/Chrome Canary"),
    Location("chrome", "windows", "canary", "AppData/Local/Google/Chrome SxS/User Data"),
    Location("chrome", "macos", "", "Library/Application Support/Google/Chrome"),
    Location("chrome", "windows", "", "AppData/Local/Google/Chrome/User Data"),
    Location("chromium", "linux", "", ".config/chromium"),
    Location("chromium", "linux", "snap", "snap/chromium/common/chromium"),
    Location("chromium", "linux", "flatpak", ".var/app/org.chromium.Chromium/config/chromium"),
    Location("chromium", "macos", "", "Library/Application Support/Chromium"),
    Location("chromium", "windows", "", "AppData/Local/Chromium/User Data"),
    Location("edge", "linux", "", ".config/microsoft-edge"),
    Location("edge", "linux", "flatpak", ".var/app/com.microsoft.Edge/config/microsoft-edge"),
    Location("edge", "linux", "beta", ".config/microsoft-edge-beta"),
    Location("edge", "linux", "dev", ".config/microsoft-edge-dev"),
    Location("edge", "macos", "", "Library/Application Support/Microsoft Edge"),
    Location("edge", "windows", "", "AppData/Local/Microsoft/Edge/User Data"),
    Location("brave", "linux", "", ".config/BraveSoftware/Brave-Browser"),
    Location("brave", "linux", "snap", "snap/brave/current/.config/BraveSoftware/Brave-Browser"),
    Location(
        "brave", "linux", "flatpak", ".var/app/com.brave.Browser/config/BraveSoftware/Brave-Browser"
    ),
    Location("brave", "macos", "", "Library/Application Support/BraveSoftware/Brave-Browser"),
    Location("brave", "windows", "", "AppData/Local/BraveSoftware/Brave-Browser/User Data"),
    # Firefox: the directory of profiles.ini.
    Location("firefox", "linux", "", ".mozilla/firefox"),
    Location("firefox", "linux", "xdg", ".config/mozilla/firefox"),
    Location("firefox", "linux", "snap", "snap/firefox/common/.mozilla/firefox"),
    Location("firefox", "linux", "flatpak", ".var/app/org.mozilla.firefox/.mozilla/firefox"),
    Location("firefox", "linux", "flatpak", ".var/app/org.mozilla.firefox/config/mozilla/firefox"),
    Location("firefox", "macos", "", "Library/Application Support/Firefox"),
    Location("firefox", "windows", "", "AppData/Roaming/Mozilla/Firefox"),
    # Safari: one set of files (Bookmarks.plist, History.db).
    Location("safari", "macos", "", "Library/Safari"),
)
