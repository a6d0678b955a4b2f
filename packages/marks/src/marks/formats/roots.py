"""Which folders are a browser's own roots (dropped on import, never turned into tags).

The rule, the same in every language: a folder is a root when the browser marks it as one -- the
`PERSONAL_TOOLBAR_FOLDER`/`UNFILED_BOOKMARKS_FOLDER` attributes in HTML, the `roots` keys of
Chrome's `Bookmarks` file, the `root` property of a Firefox backup -- at any depth; an unmarked
folder is a root only at the top of the file and only under a name a browser gives its roots
(the table below, in the languages browsers ship, compared case- and accent-insensitively).
"""

import unicodedata

ROOT_NAMES = """
bookmarks bar|bookmarks toolbar|bookmarks menu|other bookmarks|mobile bookmarks|favorites bar|
favourites bar|favorites|favourites|other favorites|other favourites|unsorted bookmarks|
personal toolbar folder|synced bookmarks|speed dial|
barre de favoris|autres favoris|favoris|favoris mobiles|barre personnelle|barre des marque-pages|
menu des marque-pages|autres marque-pages|marque-pages mobiles|
lesezeichenleiste|lesezeichen-symbolleiste|lesezeichen-menu|weitere lesezeichen|
andere lesezeichen|mobile lesezeichen|favoritenleiste|favoriten|andere favoriten|
barra de marcadores|otros marcadores|marcadores|menu de marcadores|marcadores moviles|
barra de favoritos|otros favoritos|favoritos|outros favoritos|outros marcadores|
barra dei preferiti|altri preferiti|preferiti|barra dei segnalibri|altri segnalibri|
menu dei segnalibri|segnalibri mobili|
bladwijzerbalk|andere bladwijzers|bladwijzermenu|mobiele bladwijzers|favorietenbalk|favorieten|
pasek zakladek|inne zakladki|menu zakladek|zakladki na telefonie|
панель закладок|другие закладки|меню закладок|мобильные закладки|избранное|
ブックマーク バー|ブックマークバー|その他のブックマーク|ブックマークツールバー|ブックマークメニュー|
书签栏|其他书签|书签工具栏|书签菜单|移动设备书签|收藏夹栏|
"""


def fold(name: str) -> str:
    """Case- and accent-insensitive spelling (`Menú` = `menu`, `Zakładki` = `zakladki`)."""
    decomposed = unicodedata.normalize("NFKD", name.casefold().replace("ł", "l"))
    return " ".join("".join(ch for ch in decomposed if not unicodedata.combining(ch)).split())


NAMES = frozenset(fold(name) for name in ROOT_NAMES.replace("\n", "").split("|") if name.strip())
MARKERS = ("personal_toolbar_folder", "unfiled_bookmarks_folder")


def is_root_name(name: str) -> bool:
    return fold(name) in NAMES
