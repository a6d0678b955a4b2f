"""The extension tests' fixtures (defined in test_extension_chromium.py: both browsers, a live
`marks serve`, local pages), for the other extension test modules too."""

from extension.test_extension_chromium import browser, built, firefox, pages, server  # noqa: F401
