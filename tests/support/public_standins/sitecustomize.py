"""Test-only, never shipped: in a `marks` subprocess started with this directory on PYTHONPATH,
the loopback addresses in MARKS_TEST_PUBLIC stand for hosts on the internet (see
`marks.webclient.AddressRules`): a multi-host test site's second host plays a CDN. marks itself
reads no such variable; only this file, which only tests put on the path, does."""

import os

_addresses = [a for a in os.environ.get("MARKS_TEST_PUBLIC", "").split(",") if a]
if _addresses:
    from marks import webclient

    webclient.RULES.public.update(_addresses)
