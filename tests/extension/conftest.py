"""The extension tests' fixtures (defined in test_extension_chromium.py: both browsers, a live
`marks serve`, local pages), for the other extension test modules too."""

from extension.test_extension_chromium import (  # noqa: F401
    browser,
    built,
    chromium_granted_hosts,
    firefox,
    pages,
    server,
)
