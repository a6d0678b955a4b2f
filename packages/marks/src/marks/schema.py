"""The database schema as ordered migrations; `PRAGMA user_version` says how many have run.

Opening an older file runs the missing migrations in one transaction. Never edit a migration that
has shipped: add a new one.
"""

MIGRATIONS: list[str] = [
    # 1: bookmarks, tags, the full-text index and the triggers that keep it in sync.
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
    # 2: the reading queue (priority 1 is highest; progress 100 completes an item).
    """
    CREATE TABLE reading_queue (
        bookmark_id INTEGER PRIMARY KEY REFERENCES bookmarks (id) ON DELETE CASCADE,
        priority INTEGER NOT NULL DEFAULT 3 CHECK (priority BETWEEN 1 AND 5),
        progress INTEGER NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
        queued_at TEXT NOT NULL,
        completed_at TEXT
    );
    CREATE INDEX reading_queue_open ON reading_queue (completed_at, priority, progress);
    """,
    # 3: the bookmark graph (`graph build`): undirected edges, each stored once (source < target),
    # with what makes them: tag similarity, a shared registrable domain, links in cached pages.
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
    """,
]

VERSION = len(MIGRATIONS)
