"""What every HTTP error must look like to a client: the JSON error body, never a traceback."""

import httpx

TRACEBACK_WORDS = ("Traceback", 'File "', "/site-packages/")


def assert_error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert isinstance(body["error"], str) and body["error"]
    assert not any(word in response.text for word in TRACEBACK_WORDS)
    return body
