"""The text of `tutorial`."""

TEXT = """
Your library is a filesystem. Try these, one at a time:

  ls                     the top-level directories, with how many bookmarks each holds
  cd tags; ls            tags are directories; `a/b` tags nest, bookmarks show by id
  cd /starred            collections: starred archived unread popular broken untagged pdfs
  cd /recent/this-week/visited      what you opened this week (weeks start on Monday, UTC)
  cd /by-date/added/2024            browse by year, month and day
  cd /domains; ls                   every site you keep bookmarks from
  cd 42                  a bookmark is a directory of its fields: ls, cat title, edit tags
  star; tag reading; visit          act on the bookmark you are in
  tag later              in a directory, acts on every bookmark there (asks first)
  find rust async        ranked full-text search in the current directory
  grep '\\.pdf$' url      regular expressions over one field
  which 42               every path where bookmark 42 appears
  mv old-tag new-tag     rename a tag and its subtags
  alias ll='ls -l'       aliases are kept in your config file
  help, help ls          every command; Tab completes commands, paths, tags and fields
"""
