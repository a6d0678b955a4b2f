"""`/bookmarks/{id}/content`: a page's stored text, and fetching it again now (`marks.content`)."""

import msgspec

from marks import content
from marks.library import Invalid, Library, NotFound
from marks.server.endpoint import Call, Endpoint, Param
from marks.wire import PageContent


class StoredContent(msgspec.Struct, kw_only=True):
    meta: PageContent
    text: str  # the readable text ("" when the last fetch failed and nothing was kept)


def stored(library: Library, call: Call) -> StoredContent:
    bookmark_id = call.path["id"]
    library.get(bookmark_id)
    pages = content.Content(library)
    meta = pages.stored(bookmark_id)
    if meta is None:
        raise NotFound(f"no content stored for bookmark {bookmark_id} (POST to fetch it)")
    return StoredContent(meta=meta, text=pages.text(bookmark_id))


def refresh(library: Library, call: Call) -> PageContent:
    bookmark_id = call.path["id"]
    pages = content.Content(library, call.server.health_options())
    if not pages.plan([bookmark_id]):
        raise Invalid(f"bookmark {bookmark_id} is not an http(s) link: nothing to fetch")
    results: list[PageContent] = []
    pages.refresh(force=call.query["force"], on_result=results.append)
    return results[0]


ONE = "/bookmarks/{id:int}/content"
ENDPOINTS = [
    Endpoint("GET", ONE, "A page's stored text and what is known of it (404 when none)", stored,
             response=StoredContent, errors=(404,)),
    Endpoint("POST", ONE, "Fetch the page now and store its text (outcome: stored, unchanged, "
             "too_large, failed)", refresh,
             (Param("force", bool, False, "download even if the server says it is unchanged"),),
             response=PageContent, errors=(404, 422)),
]  # fmt: skip
