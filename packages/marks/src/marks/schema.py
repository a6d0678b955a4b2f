"""The database schema as ordered migrations; `PRAGMA user_version` says how many have run.

Opening an older file runs the missing migrations in one transaction. Never edit a migration that
has shipped: add a new one.

Each migration is two parts: the data's own tables (`schema`) and what it does to the full-text
index (`full_text`), which needs FTS5. A SQLite without FTS5 runs the first part only; the store
later builds the index by replaying every `full_text` part in order (see `marks.store`), so the
index has one definition: its history here. Migrations 1, 3 and 5 were split in two when
migration 8 came (5's view moved before its index statements); on a SQLite with FTS5 they do
what they always did.
"""

import msgspec


class Migration(msgspec.Struct, frozen=True):  # cheaper to define than a named tuple
    schema: str
    full_text: str = ""  # the FTS5 statements: skipped, and replayed later, without FTS5


STEPS: list[Migration] = [
    # 1: bookmarks, tags, the full-text index and the triggers that keep it in sync.
    Migration(
        """
    CREATE TABLE bookmarks (
        id INTEGER PRIMARY KEY,
        url TEXT NOT NULL,
        url_key TEXT NOT NULL UNIQUE,          -- urls.key(url): what makes two bookmarks one
        title TEXT NOT NULL DEFAULT '',
        description TEXT NOT NULL DEFAULT '',
        tags TEXT NOT NULL DEFAULT '',         -- tag names, sorted, one per line (for search)
        domain TEXT NOT NULL DEFAULT '',       -- host without www. (indexed for listings)
        starred INTEGER NOT NULL DEFAULT 0 CHECK (starred IN (0, 1)),
        archived INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),
        added TEXT NOT NULL,                   -- ISO 8601 UTC, e.g. 2026-01-02T03:04:05Z
        last_visited TEXT,
        visit_count INTEGER NOT NULL DEFAULT 0 CHECK (visit_count >= 0),
        reachable INTEGER CHECK (reachable IN (0, 1)),   -- NULL: never checked
        last_checked TEXT,
        check_result TEXT
    );
    CREATE INDEX bookmarks_added ON bookmarks (added);
    CREATE INDEX bookmarks_last_visited ON bookmarks (last_visited);
    CREATE INDEX bookmarks_visit_count ON bookmarks (visit_count);
    CREATE INDEX bookmarks_domain ON bookmarks (domain);

    CREATE TABLE tags (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE COLLATE NOCASE
    );
    CREATE TABLE bookmark_tags (
        bookmark_id INTEGER NOT NULL REFERENCES bookmarks (id) ON DELETE CASCADE,
        tag_id INTEGER NOT NULL REFERENCES tags (id) ON DELETE CASCADE,
        PRIMARY KEY (bookmark_id, tag_id)
    ) WITHOUT ROWID;
    CREATE INDEX bookmark_tags_by_tag ON bookmark_tags (tag_id, bookmark_id);

    -- bookmarks.tags follows the join table, so the index below can never go stale.
    CREATE TRIGGER bookmark_tags_added AFTER INSERT ON bookmark_tags BEGIN
        UPDATE bookmarks SET tags = fresh.names
        FROM (SELECT coalesce(group_concat(name, char(10)), '') AS names FROM (
                SELECT t.name FROM bookmark_tags bt JOIN tags t ON t.id = bt.tag_id
                WHERE bt.bookmark_id = NEW.bookmark_id ORDER BY t.name)) AS fresh
        WHERE bookmarks.id = NEW.bookmark_id AND bookmarks.tags IS NOT fresh.names;
    END;
    CREATE TRIGGER bookmark_tags_removed AFTER DELETE ON bookmark_tags BEGIN
        UPDATE bookmarks SET tags = fresh.names
        FROM (SELECT coalesce(group_concat(name, char(10)), '') AS names FROM (
                SELECT t.name FROM bookmark_tags bt JOIN tags t ON t.id = bt.tag_id
                WHERE bt.bookmark_id = OLD.bookmark_id ORDER BY t.name)) AS fresh
        WHERE bookmarks.id = OLD.bookmark_id AND bookmarks.tags IS NOT fresh.names;
    END;
    CREATE TRIGGER tags_renamed AFTER UPDATE OF name ON tags BEGIN
        UPDATE bookmarks SET tags = (
            SELECT coalesce(group_concat(name, char(10)), '') FROM (
                SELECT t.name FROM bookmark_tags bt JOIN tags t ON t.id = bt.tag_id
                WHERE bt.bookmark_id = bookmarks.id ORDER BY t.name))
        WHERE id IN (SELECT bookmark_id FROM bookmark_tags WHERE tag_id = NEW.id);
    END;

    """,
        """
    CREATE VIRTUAL TABLE bookmarks_fts USING fts5 (
        title, description, url, tags,
        content = 'bookmarks', content_rowid = 'id',
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER bookmarks_fts_insert AFTER INSERT ON bookmarks BEGIN
        INSERT INTO bookmarks_fts (rowid, title, description, url, tags)
        VALUES (NEW.id, NEW.title, NEW.description, NEW.url, NEW.tags);
    END;
    CREATE TRIGGER bookmarks_fts_delete AFTER DELETE ON bookmarks BEGIN
        INSERT INTO bookmarks_fts (bookmarks_fts, rowid, title, description, url, tags)
        VALUES ('delete', OLD.id, OLD.title, OLD.description, OLD.url, OLD.tags);
    END;
    CREATE TRIGGER bookmarks_fts_update AFTER UPDATE OF title, description, url, tags
    ON bookmarks BEGIN
        INSERT INTO bookmarks_fts (bookmarks_fts, rowid, title, description, url, tags)
        VALUES ('delete', OLD.id, OLD.title, OLD.description, OLD.url, OLD.tags);
        INSERT INTO bookmarks_fts (rowid, title, description, url, tags)
        VALUES (NEW.id, NEW.title, NEW.description, NEW.url, NEW.tags);
    END;
    """,
    ),
    # 2: the reading queue (priority 1 is highest; progress 100 completes an item).
    Migration(
        """
    CREATE TABLE reading_queue (
        bookmark_id INTEGER PRIMARY KEY REFERENCES bookmarks (id) ON DELETE CASCADE,
        priority INTEGER NOT NULL DEFAULT 3 CHECK (priority BETWEEN 1 AND 5),
        progress INTEGER NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
        queued_at TEXT NOT NULL,
        completed_at TEXT
    );
    CREATE INDEX reading_queue_open ON reading_queue (completed_at, priority, progress);
    """
    ),
    # 3 (search words): an unstemmed copy of the full-text index, so `programm*` finds
    # "Programming" (prefixes against the porter index match stems only: "program").
    Migration(
        "",
        """
    CREATE VIRTUAL TABLE bookmarks_words USING fts5 (
        title, description, url, tags,
        content = 'bookmarks', content_rowid = 'id',
        tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER bookmarks_words_insert AFTER INSERT ON bookmarks BEGIN
        INSERT INTO bookmarks_words (rowid, title, description, url, tags)
        VALUES (NEW.id, NEW.title, NEW.description, NEW.url, NEW.tags);
    END;
    CREATE TRIGGER bookmarks_words_delete AFTER DELETE ON bookmarks BEGIN
        INSERT INTO bookmarks_words (bookmarks_words, rowid, title, description, url, tags)
        VALUES ('delete', OLD.id, OLD.title, OLD.description, OLD.url, OLD.tags);
    END;
    CREATE TRIGGER bookmarks_words_update AFTER UPDATE OF title, description, url, tags
    ON bookmarks BEGIN
        INSERT INTO bookmarks_words (bookmarks_words, rowid, title, description, url, tags)
        VALUES ('delete', OLD.id, OLD.title, OLD.description, OLD.url, OLD.tags);
        INSERT INTO bookmarks_words (rowid, title, description, url, tags)
        VALUES (NEW.id, NEW.title, NEW.description, NEW.url, NEW.tags);
    END;
    INSERT INTO bookmarks_words (bookmarks_words) VALUES ('rebuild');
    """,
    ),
    # 4 (tag keys): tags are one whatever their case in every script (`Äpfel` = `äpfel`), so
    # each has its Unicode case-folded name as a unique key, computed by SQLite from the name
    # (the deterministic `casefold()` the store registers), so no writer can forget or fake it.
    # Tags that now collide are merged into the oldest spelling, every bookmark keeping its tags;
    # `tag_merges` records each merge and the store reports them once.
    Migration(
        """
    ALTER TABLE tags ADD COLUMN key TEXT GENERATED ALWAYS AS (casefold(name)) VIRTUAL;
    CREATE TABLE tag_merges (name TEXT NOT NULL, kept TEXT NOT NULL, bookmarks INTEGER NOT NULL);
    INSERT INTO tag_merges (name, kept, bookmarks)
        SELECT t.name, k.name, (SELECT count(*) FROM bookmark_tags WHERE tag_id = t.id)
        FROM tags t JOIN tags k ON k.id = (SELECT min(id) FROM tags WHERE key = t.key)
        WHERE t.id != k.id ORDER BY t.id;
    INSERT OR IGNORE INTO bookmark_tags (bookmark_id, tag_id)
        SELECT bt.bookmark_id, (SELECT min(id) FROM tags k WHERE k.key = t.key)
        FROM bookmark_tags bt JOIN tags t ON t.id = bt.tag_id
        WHERE t.id != (SELECT min(id) FROM tags k WHERE k.key = t.key);
    DELETE FROM tags WHERE id != (SELECT min(id) FROM tags k WHERE k.key = tags.key);
    CREATE UNIQUE INDEX tags_key ON tags (key);
    """
    ),
    # 5: link health history, the page content cache, and cached page text in the full-text index.
    # The index's content becomes a view joining bookmarks and page text; page text changes reach
    # the index through page_content's own triggers. Never INSERT OR REPLACE into page_content
    # (REPLACE deletes without firing triggers): upsert instead. (The view, plain SQL, now comes
    # before the index's statements; on a SQLite with FTS5 the effect is the same.)
    Migration(
        """
    CREATE TABLE health_checks (
        id INTEGER PRIMARY KEY,
        bookmark_id INTEGER NOT NULL REFERENCES bookmarks (id) ON DELETE CASCADE,
        checked_at TEXT NOT NULL,
        url TEXT NOT NULL,                     -- the URL checked (the bookmark's URL then)
        result TEXT NOT NULL,                  -- ok, redirect, client_error, server_error, ...
        status INTEGER,                        -- HTTP status, when there was a response
        reachable INTEGER NOT NULL CHECK (reachable IN (0, 1)),
        final_url TEXT,                        -- where redirects ended
        detail TEXT NOT NULL DEFAULT '',
        elapsed_ms INTEGER,
        failing_since TEXT                     -- first check of the current run of failures
    );
    CREATE INDEX health_checks_by_bookmark ON health_checks (bookmark_id, id);

    CREATE TABLE page_content (
        bookmark_id INTEGER PRIMARY KEY REFERENCES bookmarks (id) ON DELETE CASCADE,
        fetched_at TEXT NOT NULL,              -- last time the page was asked for
        changed_at TEXT,                       -- last time a new body was stored
        url TEXT NOT NULL,                     -- final URL after redirects
        status INTEGER,
        kind TEXT NOT NULL,                    -- html, pdf, text, other, too_large, error
        content_type TEXT NOT NULL DEFAULT '',
        etag TEXT,
        last_modified TEXT,
        size INTEGER NOT NULL DEFAULT 0,       -- bytes of the original body
        original BLOB,                         -- the body, zlib-compressed
        text TEXT NOT NULL DEFAULT '',         -- extracted readable text (indexed)
        title TEXT NOT NULL DEFAULT '',
        description TEXT NOT NULL DEFAULT '',
        error TEXT NOT NULL DEFAULT ''
    );

    CREATE VIEW bookmarks_fts_source AS
        SELECT b.id, b.title, b.description, b.url, b.tags, coalesce(c.text, '') AS page_text
        FROM bookmarks b LEFT JOIN page_content c ON c.bookmark_id = b.id;
    """,
        """
    DROP TRIGGER bookmarks_fts_insert;
    DROP TRIGGER bookmarks_fts_delete;
    DROP TRIGGER bookmarks_fts_update;
    DROP TABLE bookmarks_fts;
    CREATE VIRTUAL TABLE bookmarks_fts USING fts5 (
        title, description, url, tags, page_text,
        content = 'bookmarks_fts_source', content_rowid = 'id',
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    INSERT INTO bookmarks_fts (bookmarks_fts) VALUES ('rebuild');

    CREATE TRIGGER bookmarks_fts_insert AFTER INSERT ON bookmarks BEGIN
        INSERT INTO bookmarks_fts (rowid, title, description, url, tags, page_text)
        VALUES (NEW.id, NEW.title, NEW.description, NEW.url, NEW.tags,
                coalesce((SELECT text FROM page_content WHERE bookmark_id = NEW.id), ''));
    END;
    -- BEFORE: the page text is still there (the cascade removes it after the row).
    CREATE TRIGGER bookmarks_fts_delete BEFORE DELETE ON bookmarks BEGIN
        INSERT INTO bookmarks_fts (bookmarks_fts, rowid, title, description, url, tags, page_text)
        VALUES ('delete', OLD.id, OLD.title, OLD.description, OLD.url, OLD.tags,
                coalesce((SELECT text FROM page_content WHERE bookmark_id = OLD.id), ''));
    END;
    CREATE TRIGGER bookmarks_fts_update AFTER UPDATE OF title, description, url, tags
    ON bookmarks BEGIN
        INSERT INTO bookmarks_fts (bookmarks_fts, rowid, title, description, url, tags, page_text)
        VALUES ('delete', OLD.id, OLD.title, OLD.description, OLD.url, OLD.tags,
                coalesce((SELECT text FROM page_content WHERE bookmark_id = OLD.id), ''));
        INSERT INTO bookmarks_fts (rowid, title, description, url, tags, page_text)
        VALUES (NEW.id, NEW.title, NEW.description, NEW.url, NEW.tags,
                coalesce((SELECT text FROM page_content WHERE bookmark_id = NEW.id), ''));
    END;
    CREATE TRIGGER page_content_fts_insert AFTER INSERT ON page_content BEGIN
        INSERT INTO bookmarks_fts (bookmarks_fts, rowid, title, description, url, tags, page_text)
        SELECT 'delete', id, title, description, url, tags, '' FROM bookmarks
        WHERE id = NEW.bookmark_id;
        INSERT INTO bookmarks_fts (rowid, title, description, url, tags, page_text)
        SELECT id, title, description, url, tags, NEW.text FROM bookmarks
        WHERE id = NEW.bookmark_id;
    END;
    CREATE TRIGGER page_content_fts_update AFTER UPDATE OF text ON page_content BEGIN
        INSERT INTO bookmarks_fts (bookmarks_fts, rowid, title, description, url, tags, page_text)
        SELECT 'delete', id, title, description, url, tags, OLD.text FROM bookmarks
        WHERE id = OLD.bookmark_id;
        INSERT INTO bookmarks_fts (rowid, title, description, url, tags, page_text)
        SELECT id, title, description, url, tags, NEW.text FROM bookmarks
        WHERE id = NEW.bookmark_id;
    END;
    -- A bookmark deleted with its page: the bookmark row is gone already, so nothing happens.
    CREATE TRIGGER page_content_fts_delete AFTER DELETE ON page_content BEGIN
        INSERT INTO bookmarks_fts (bookmarks_fts, rowid, title, description, url, tags, page_text)
        SELECT 'delete', id, title, description, url, tags, OLD.text FROM bookmarks
        WHERE id = OLD.bookmark_id;
        INSERT INTO bookmarks_fts (rowid, title, description, url, tags, page_text)
        SELECT id, title, description, url, tags, '' FROM bookmarks
        WHERE id = OLD.bookmark_id;
    END;
    """,
    ),
    # 6: url_key becomes a real normalisation that keeps the fragment (urls.key, registered on the
    # connection as marks_url_key). Bookmarks that now share a key are all kept: the oldest takes
    # the key, the others keep a key no URL can have (it holds a line break) and are listed in
    # url_key_collisions, which `db info` counts and `db dedupe` offers to merge.
    Migration(
        """
    CREATE TEMP TABLE rekey AS SELECT id, marks_url_key(url) AS new_key FROM bookmarks;
    CREATE INDEX temp.rekey_by_key ON rekey (new_key, id);
    CREATE TABLE url_key_collisions (
        bookmark_id INTEGER PRIMARY KEY REFERENCES bookmarks (id) ON DELETE CASCADE,
        same_as INTEGER NOT NULL,
        url_key TEXT NOT NULL
    );
    INSERT INTO url_key_collisions (bookmark_id, same_as, url_key)
        SELECT r.id, (SELECT min(o.id) FROM rekey o WHERE o.new_key = r.new_key), r.new_key
        FROM rekey r WHERE EXISTS (
            SELECT 1 FROM rekey o WHERE o.new_key = r.new_key AND o.id < r.id);
    UPDATE bookmarks SET url_key = char(10) || id;
    UPDATE bookmarks SET url_key = (SELECT new_key FROM rekey WHERE rekey.id = bookmarks.id)
        WHERE id NOT IN (SELECT bookmark_id FROM url_key_collisions);
    UPDATE bookmarks SET url_key = (SELECT url_key FROM url_key_collisions c
            WHERE c.bookmark_id = bookmarks.id) || char(10) || 'collision ' || id
        WHERE id IN (SELECT bookmark_id FROM url_key_collisions);
    DROP TABLE temp.rekey;
    """
    ),
    # 7: the bookmark graph (`graph build`): undirected edges, each stored once (source < target),
    # with what makes them: tag similarity, a shared registrable domain, links in cached pages.
    Migration(
        """
    CREATE TABLE graph_edges (
        source INTEGER NOT NULL,           -- bookmarks.id; the trigger below removes edges of
        target INTEGER NOT NULL,           -- deleted bookmarks (no foreign keys: a rebuild
        weight REAL NOT NULL,              -- empties the table at once instead of row by row)
        tags REAL NOT NULL DEFAULT 0,      -- Jaccard of the tag sets, ancestors included
        site TEXT,                         -- the registrable domain both are on, else NULL
        link INTEGER NOT NULL DEFAULT 0,   -- 1: source links to target, 2: the reverse, 3: both
        PRIMARY KEY (source, target),
        CHECK (source < target)
    ) WITHOUT ROWID;
    CREATE INDEX graph_edges_by_target ON graph_edges (target, source);
    CREATE TRIGGER graph_edges_forget AFTER DELETE ON bookmarks BEGIN
        DELETE FROM graph_edges WHERE source = OLD.id;
        DELETE FROM graph_edges WHERE target = OLD.id;
    END;
    CREATE TABLE graph_builds (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        built_at TEXT NOT NULL,
        nodes INTEGER NOT NULL,
        edges INTEGER NOT NULL
    );
    """
    ),
    # 8 (optional full-text index): nothing in the file changes; from here on its full-text index
    # may be absent. A SQLite without FTS5 creates files without it, and drops its triggers when
    # it opens a file that has one (a write would fail in them); a SQLite with FTS5 builds the
    # index again from the bookmarks on opening (`marks.store`). The version is the fence: an
    # older marks, which would trust a stale index or miss an absent one, refuses the file.
    Migration("-- nothing to change: the version number is the point"),
    # 9: page snapshots, and one store for every kept page body. `snapshot_blobs` holds each body
    # once (keyed by the SHA-256 of its bytes, zlib-compressed): snapshots and page content point
    # at it, so a page kept by both is stored once. Content's originals move there (the functions
    # are registered by `marks.store`). Blobs outlive their last reference until `snapshot
    # delete`, `snapshot prune` or `db vacuum` collects them, so a trash can hold rows that name
    # them. The snapshot's text is page_content's text: the full-text index needs no change.
    Migration(
        """
    CREATE TABLE snapshot_blobs (
        sha256 TEXT PRIMARY KEY,               -- hex SHA-256 of the uncompressed bytes
        size INTEGER NOT NULL,                 -- uncompressed bytes
        data BLOB NOT NULL                     -- zlib-compressed
    );
    CREATE TABLE snapshots (
        id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: a link to a snapshot stays its
        bookmark_id INTEGER NOT NULL REFERENCES bookmarks (id) ON DELETE CASCADE,
        taken_at TEXT NOT NULL,
        url TEXT NOT NULL,                     -- the page's URL (after redirects)
        source TEXT NOT NULL CHECK (source IN ('fetch', 'browser')),
        blob TEXT NOT NULL,                    -- snapshot_blobs.sha256 of the HTML
        size INTEGER NOT NULL,                 -- bytes of the HTML
        title TEXT NOT NULL DEFAULT '',
        omitted TEXT NOT NULL DEFAULT '[]'     -- JSON: what was left out, and why
    );
    CREATE INDEX snapshots_by_bookmark ON snapshots (bookmark_id, id);
    CREATE INDEX snapshots_by_blob ON snapshots (blob);

    ALTER TABLE page_content ADD COLUMN blob TEXT;     -- snapshot_blobs.sha256 of the original
    INSERT OR IGNORE INTO snapshot_blobs (sha256, size, data)
        SELECT marks_sha256(marks_inflate(original)), length(marks_inflate(original)), original
        FROM page_content WHERE original IS NOT NULL;
    UPDATE page_content SET blob = marks_sha256(marks_inflate(original))
        WHERE original IS NOT NULL;
    ALTER TABLE page_content DROP COLUMN original;
    CREATE INDEX page_content_by_blob ON page_content (blob);
    """
    ),
    # 10 (trash and undo): a deleted bookmark moves to the trash with every row that hangs on it
    # (found through the foreign keys to `bookmarks`, so tables added later come along), each
    # row as a JSONB object of its columns (BLOBs as {"hex": ...}); the undo journal keeps, per
    # destructive change, what the change is about to overwrite (see `marks.journal`).
    Migration(
        """
    CREATE TABLE undo_steps (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        action TEXT NOT NULL,                  -- delete, tag rename, tag delete, dedupe, ...
        summary TEXT NOT NULL DEFAULT ''       -- what `marks undo` says it undid
    );
    CREATE TABLE undo_bookmarks (              -- before-images of changed (not deleted) bookmarks
        step INTEGER NOT NULL REFERENCES undo_steps (id) ON DELETE CASCADE,
        bookmark_id INTEGER NOT NULL,
        fields TEXT,                           -- JSON object of the columns the change may alter
        tag_ids TEXT                           -- JSON array of its tag ids, NULL: tags untouched
    );
    CREATE INDEX undo_bookmarks_by_step ON undo_bookmarks (step);
    CREATE TABLE undo_tags (                   -- the tags those bookmarks had, by id and name
        step INTEGER NOT NULL REFERENCES undo_steps (id) ON DELETE CASCADE,
        tag_id INTEGER NOT NULL,
        name TEXT NOT NULL
    );
    CREATE INDEX undo_tags_by_step ON undo_tags (step);
    CREATE TABLE trash (
        id INTEGER PRIMARY KEY,
        bookmark_id INTEGER NOT NULL,          -- the id it had, and gets back when it is free
        url TEXT NOT NULL,
        url_key TEXT NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        deleted_at TEXT NOT NULL,
        step INTEGER REFERENCES undo_steps (id) ON DELETE SET NULL
    );
    CREATE INDEX trash_by_bookmark ON trash (bookmark_id);
    CREATE INDEX trash_by_time ON trash (deleted_at);
    CREATE INDEX trash_by_step ON trash (step);
    CREATE TABLE trash_rows (
        entry INTEGER NOT NULL REFERENCES trash (id) ON DELETE CASCADE,
        tbl TEXT NOT NULL,                     -- the table the row came from
        row BLOB NOT NULL                      -- JSONB object: column -> value
    );
    CREATE INDEX trash_rows_by_entry ON trash_rows (entry);
    """
    ),
    # 11 (a million bookmarks): an index for each collection the shell lists, holding only its
    # bookmarks in the order it lists them (newest first; the row id is in every index), so
    # counting and showing /starred, /unread, /broken... reads the collection's own entries
    # instead of every bookmark (a scan of a million rows, or a sort of 600,000 for /unread).
    # The WHERE of each is the collection's filter word for word (vfs.COLLECTIONS): SQLite uses a
    # partial index only for a query whose terms imply it. /unread's starts with visit_count:
    # given `visit_count = 0` the planner takes an index with that equality, and only one that
    # has the order too spares it sorting most of the library.
    Migration(
        """
    CREATE INDEX bookmarks_starred ON bookmarks (added) WHERE starred = 1;
    CREATE INDEX bookmarks_archived ON bookmarks (added) WHERE archived = 1;
    CREATE INDEX bookmarks_unread ON bookmarks (visit_count, added) WHERE visit_count = 0;
    CREATE INDEX bookmarks_broken ON bookmarks (added) WHERE reachable = 0;
    CREATE INDEX bookmarks_untagged ON bookmarks (added) WHERE tags = '';
    CREATE INDEX bookmarks_pdfs ON bookmarks (added) WHERE url LIKE '%.pdf';
    """
    ),
    # 12: an archived copy of a dead link (`bookmark health --wayback`): the Wayback Machine's
    # capture closest to the bookmark's date, and when it was captured.
    Migration(
        """
    ALTER TABLE bookmarks ADD COLUMN archived_url TEXT;
    ALTER TABLE bookmarks ADD COLUMN archived_at TEXT;   -- ISO 8601 UTC, as `added`
    """
    ),
    # 13 (the web UI's stats at a million): the checked links, so that counting the never-checked
    # is every bookmark less these (a scan of the table before: most links are never checked).
    # Partial, so it holds only what a link check or an import of checked links wrote. On the id
    # alone: an index on `reachable` would draw `/broken`'s `reachable = 0` away from its own
    # index, which lists it in order (the plan test caught it).
    Migration(
        """
    CREATE INDEX bookmarks_checked ON bookmarks (id) WHERE reachable IS NOT NULL;
    """
    ),
    # 14 (the shell's `ls` at a million): the top-level tag directories kept in a table, one row per
    # directory, so `ls /tags` reads 12,000 rows in order instead of every one of 23,000 tag names
    # cut, folded and sorted in Python. `tags.root` is a tag's first segment, case-folded (cut
    # from `key`, already folded: folding goes character by character and keeps `/`); virtual,
    # so it costs no space in the table, and its index answers the triggers' `min(name)` with
    # one seek. `tag_roots.first` is the first of the root's tags in the names' case-insensitive
    # order: a directory is spelled as that tag spells its first segment (as `ls /tags` did when
    # it read the names in that order). The triggers keep it under every write to `tags`.
    Migration(
        """
    ALTER TABLE tags ADD COLUMN root TEXT
        GENERATED ALWAYS AS (substr(key, 1, instr(key || '/', '/') - 1)) VIRTUAL;
    CREATE INDEX tags_root ON tags (root, name);
    CREATE TABLE tag_roots (
        root TEXT PRIMARY KEY,                 -- tags.root
        first TEXT NOT NULL COLLATE NOCASE,    -- min(tags.name) of the tags with this root
        name TEXT GENERATED ALWAYS AS          -- the directory's name: `first`'s first segment
            (substr(first, 1, instr(first || '/', '/') - 1)) STORED
    ) WITHOUT ROWID;
    INSERT INTO tag_roots (root, first) SELECT root, min(name) FROM tags GROUP BY root;
    CREATE TRIGGER tag_roots_added AFTER INSERT ON tags BEGIN
        INSERT INTO tag_roots (root, first) VALUES (NEW.root, NEW.name)
            ON CONFLICT (root) DO UPDATE SET first = excluded.first WHERE excluded.first < first;
    END;
    CREATE TRIGGER tag_roots_removed AFTER DELETE ON tags BEGIN
        DELETE FROM tag_roots WHERE root = OLD.root
            AND NOT EXISTS (SELECT 1 FROM tags WHERE root = OLD.root);
        UPDATE tag_roots SET first = (SELECT min(name) FROM tags WHERE root = OLD.root)
            WHERE root = OLD.root AND first = OLD.name;
    END;
    CREATE TRIGGER tag_roots_renamed AFTER UPDATE OF name ON tags BEGIN
        DELETE FROM tag_roots WHERE root = OLD.root
            AND NOT EXISTS (SELECT 1 FROM tags WHERE root = OLD.root);
        UPDATE tag_roots SET first = (SELECT min(name) FROM tags WHERE root = OLD.root)
            WHERE root = OLD.root AND first = OLD.name;
        INSERT INTO tag_roots (root, first) VALUES (NEW.root, NEW.name)
            ON CONFLICT (root) DO UPDATE SET first = excluded.first WHERE excluded.first < first;
    END;

    -- The visited bookmarks counted as they change, for `ls /`, `/recent` and `/unread`:
    -- counting them read a third of the library's entries in an index (46 M instructions
    -- each at a million). A trigger runs its UPDATE only when a bookmark enters or leaves a
    -- count (the WHEN), so a write that leaves both alone costs a comparison.
    CREATE TABLE visit_counts (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        visited INTEGER NOT NULL,              -- bookmarks with visit_count > 0
        seen INTEGER NOT NULL                  -- bookmarks with last_visited IS NOT NULL
    );
    INSERT INTO visit_counts (id, visited, seen) VALUES (1,
        (SELECT count(*) FROM bookmarks WHERE visit_count > 0),
        (SELECT count(*) FROM bookmarks WHERE last_visited IS NOT NULL));
    CREATE TRIGGER visit_counts_added AFTER INSERT ON bookmarks
    WHEN NEW.visit_count > 0 OR NEW.last_visited IS NOT NULL BEGIN
        UPDATE visit_counts SET visited = visited + (NEW.visit_count > 0),
            seen = seen + (NEW.last_visited IS NOT NULL);
    END;
    CREATE TRIGGER visit_counts_removed AFTER DELETE ON bookmarks
    WHEN OLD.visit_count > 0 OR OLD.last_visited IS NOT NULL BEGIN
        UPDATE visit_counts SET visited = visited - (OLD.visit_count > 0),
            seen = seen - (OLD.last_visited IS NOT NULL);
    END;
    CREATE TRIGGER visit_counts_changed AFTER UPDATE OF visit_count, last_visited ON bookmarks
    WHEN (OLD.visit_count > 0) != (NEW.visit_count > 0)
        OR (OLD.last_visited IS NULL) != (NEW.last_visited IS NULL) BEGIN
        UPDATE visit_counts SET
            visited = visited + (NEW.visit_count > 0) - (OLD.visit_count > 0),
            seen = seen + (NEW.last_visited IS NOT NULL) - (OLD.last_visited IS NOT NULL);
    END;

    -- Each domain with how many bookmarks it holds, for `ls /domains` (its names; with -l
    -- their counts), the root's count of domains and `/stats`: finding 5,513 domains in the
    -- domain index took one seek each (34 M instructions at a million), counting them read
    -- every entry. A bookmark without a host (domain '') is in none.
    CREATE TABLE domain_counts (
        domain TEXT PRIMARY KEY,               -- bookmarks.domain
        bookmarks INTEGER NOT NULL CHECK (bookmarks > 0)
    ) WITHOUT ROWID;
    INSERT INTO domain_counts (domain, bookmarks)
        SELECT domain, count(*) FROM bookmarks WHERE domain > '' GROUP BY domain;
    CREATE TRIGGER domain_counts_added AFTER INSERT ON bookmarks WHEN NEW.domain > '' BEGIN
        INSERT INTO domain_counts (domain, bookmarks) VALUES (NEW.domain, 1)
            ON CONFLICT (domain) DO UPDATE SET bookmarks = bookmarks + 1;
    END;
    CREATE TRIGGER domain_counts_removed AFTER DELETE ON bookmarks WHEN OLD.domain > '' BEGIN
        DELETE FROM domain_counts WHERE domain = OLD.domain AND bookmarks = 1;
        UPDATE domain_counts SET bookmarks = bookmarks - 1 WHERE domain = OLD.domain;
    END;
    CREATE TRIGGER domain_counts_moved AFTER UPDATE OF domain ON bookmarks
    WHEN OLD.domain IS NOT NEW.domain BEGIN
        DELETE FROM domain_counts WHERE domain = OLD.domain AND bookmarks = 1;
        UPDATE domain_counts SET bookmarks = bookmarks - 1 WHERE domain = OLD.domain;
        INSERT INTO domain_counts (domain, bookmarks) SELECT NEW.domain, 1 WHERE NEW.domain > ''
            ON CONFLICT (domain) DO UPDATE SET bookmarks = bookmarks + 1;
    END;
    """
    ),
]

# The counts schema 14 keeps, each counted afresh: what the migration writes, and what a bulk
# write that turns the counting triggers off (an import, see `importing.bulk_load`) writes after.
# The tag directories too: an import only adds tags, each new one an upsert into `tag_roots`
# (0.23 s of CPU for the million's 22,903 tags, against 0.06 s without the trigger and 6 ms to
# count them all again).
KEPT_COUNTS_TRIGGERS = (
    "visit_counts_added",
    "visit_counts_removed",
    "visit_counts_changed",
    "domain_counts_added",
    "domain_counts_removed",
    "domain_counts_moved",
    "tag_roots_added",
)
RECOUNT = """
    UPDATE visit_counts SET
        visited = (SELECT count(*) FROM bookmarks WHERE visit_count > 0),
        seen = (SELECT count(*) FROM bookmarks WHERE last_visited IS NOT NULL);
    DELETE FROM domain_counts;
    INSERT INTO domain_counts (domain, bookmarks)
        SELECT domain, count(*) FROM bookmarks WHERE domain > '' GROUP BY domain;
    DELETE FROM tag_roots;
    INSERT INTO tag_roots (root, first) SELECT root, min(name) FROM tags GROUP BY root;
"""

# Each migration whole, as one script (for tests that build files as an older marks left them).
MIGRATIONS: list[str] = [step.schema + step.full_text for step in STEPS]
VERSION = len(STEPS)

# The index as the last migration leaves it: its tables, and the triggers that keep it in sync.
# Without FTS5 the triggers are dropped (the tables stay: dropping them needs the module).
FULL_TEXT_TABLES = ("bookmarks_fts", "bookmarks_words")
FULL_TEXT_TRIGGERS = (
    "bookmarks_fts_insert",
    "bookmarks_fts_delete",
    "bookmarks_fts_update",
    "bookmarks_words_insert",
    "bookmarks_words_delete",
    "bookmarks_words_update",
    "page_content_fts_insert",
    "page_content_fts_update",
    "page_content_fts_delete",
)
