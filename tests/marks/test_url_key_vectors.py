"""marks' url_key against the vectors the browser extension is tested with too."""

import json
from pathlib import Path

from marks import urls

VECTORS = json.loads((Path(__file__).parents[1] / "data" / "url_keys.json").read_text())["vectors"]


def test_url_keys_match_the_shared_vectors():
    assert [urls.key(url) for url, _ in VECTORS] == [key for _, key in VECTORS]


def test_a_key_is_its_own_key():
    for url, key in VECTORS:
        assert urls.key(key) == key, url
