"""Files as an older marks left them: a current file with the later migrations taken back."""

import apsw

# What schema 14 added (the shell's kept directories and counts), taken back.
BEFORE_14 = """
    DROP TRIGGER tag_roots_added;
    DROP TRIGGER tag_roots_removed;
    DROP TRIGGER tag_roots_renamed;
    DROP TABLE tag_roots;
    DROP INDEX tags_root;
    ALTER TABLE tags DROP COLUMN root;
    DROP TRIGGER visit_counts_added;
    DROP TRIGGER visit_counts_removed;
    DROP TRIGGER visit_counts_changed;
    DROP TABLE visit_counts;
    DROP TRIGGER domain_counts_added;
    DROP TRIGGER domain_counts_removed;
    DROP TRIGGER domain_counts_moved;
    DROP TABLE domain_counts;
    PRAGMA user_version = 13;
"""


def before_14(connection: apsw.Connection) -> None:
    """Take schema 14 back on a plain connection (tags' generated columns call `casefold`)."""
    connection.create_scalar_function(
        "casefold",
        lambda text: text.casefold() if isinstance(text, str) else text,
        1,
        deterministic=True,
    )
    connection.execute(BEFORE_14)
