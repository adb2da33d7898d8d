"""The emulated screen a recording's output is replayed on: pyte's, plus what tmux (whose panes our
terminal sandbox shows) does that pyte does not.

- Rows scrolled into the history (full-screen scrolls on the main screen) are counted, so a step's
  observation can say how many rows of its output scrolled off, as the sandbox's does.
- The alternate screen (full-screen programs) gives the main screen back when the program leaves it.
- A resize keeps the content, as tmux does (`screen_resize_y` in tmux's screen.c): a narrower screen
  cuts rows at the new width (no reflow of wrapped lines); a shorter one first drops blank rows below
  the cursor, then pushes rows at the top into the history; a taller one adds blank rows at the bottom
  (tmux would pull rows back from its history, which a replay does not keep). pyte's own resize
  deletes rows at the cursor's home position, which blanked the screen.
- Which rows changed since the last `dirty.clear()` stays right across scrolls: a scroll moves the
  changed rows up with their content instead of marking every row, so a line typed at the bottom of
  the screen that wraps (and scrolls) is still a change of the input line alone.
"""

from __future__ import annotations

from typing import Any

import pyte

_ALTERNATE_SCREEN = {47, 1047, 1049}
Rows = dict[int, Any]  # row number -> pyte's row (column -> Char)


class ReplayScreen(pyte.Screen):
    """pyte's screen with tmux's scroll count, alternate screen and resize (see the module doc)."""

    def __init__(self, columns: int, lines: int) -> None:
        super().__init__(columns, lines)
        self.scrolled = 0  # rows pushed into the main screen's history
        self.shifts = 0  # full-screen scrolls, on either screen
        self._saved: tuple[Rows, Any] | None = None  # the main screen while the alternate one shows

    def index(self) -> None:
        top, bottom = self.margins or (0, self.lines - 1)
        if self.cursor.y != bottom or (top, bottom) != (0, self.lines - 1):
            super().index()
            return
        if self._saved is None:
            self.scrolled += 1
        self.shifts += 1
        moved = {y - 1 for y in self.dirty if y > 0}
        super().index()
        self.dirty = moved | {bottom}

    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private") and _ALTERNATE_SCREEN & set(modes) and self._saved is None:
            self._saved = ({y: dict(row) for y, row in self.buffer.items()}, self.cursor)
            self.cursor = pyte.screens.Cursor(self.cursor.x, self.cursor.y, self.cursor.attrs)
            self.erase_in_display(2)
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private") and _ALTERNATE_SCREEN & set(modes) and self._saved is not None:
            rows, cursor = self._saved
            self._saved = None
            self.erase_in_display(2)
            for y, row in rows.items():
                if y < self.lines:
                    self.buffer[y].update({x: char for x, char in row.items() if x < self.columns})
            self.cursor = cursor
            self.ensure_hbounds()
            self.ensure_vbounds()
        super().reset_mode(*modes, **kwargs)

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        lines, columns = lines or self.lines, columns or self.columns
        if (lines, columns) == (self.lines, self.columns):
            return
        old_lines, old_columns = self.lines, self.columns
        live = {y: row for y, row in self.buffer.items() if y < old_lines}
        live, self.cursor.y, pushed = _fit_rows(live, self.cursor.y, old_lines, lines, columns)
        self.buffer.clear()
        self.buffer.update(live)
        if self._saved is None:
            self.scrolled += pushed
        else:
            rows, cursor = self._saved
            rows, cursor.y, pushed = _fit_rows(rows, cursor.y, old_lines, lines, columns)
            self._saved = (rows, cursor)
            self.scrolled += pushed
        self.lines, self.columns = lines, columns
        self.margins = None  # as a terminal does: the scrolling region is the whole new screen
        wider = {t for t in range(8, columns, 8) if t >= old_columns}  # pyte's default stops, every 8
        self.tabstops = {t for t in self.tabstops if t < columns} | wider
        self.ensure_hbounds()
        self.ensure_vbounds()
        self.dirty.update(range(lines))

    def text(self) -> str:
        """The screen as the sandbox shows tmux's: rows without trailing blanks, no trailing empty rows.
        pyte's `display` would render every cell of every row (a second for an empty 1000x1000
        screen); a row's cells past its last written one are blank, so only written cells are read."""
        rows = [row_text(self.buffer.get(y), self.columns) for y in range(self.lines)]
        while rows and not rows[-1]:
            rows.pop()
        return "\n".join(rows)


def _fit_rows(rows: Rows, cursor_y: int, old_lines: int, lines: int, columns: int) -> tuple[Rows, int, int]:
    """(rows, cursor row, rows pushed off the top) of a screen resized to `lines` x `columns`."""
    for row in rows.values():
        for x in [x for x in row if x >= columns]:  # as costly as the erase that filled the row
            del row[x]
    spare = old_lines - lines
    bottom = old_lines - 1
    while spare > 0 and bottom > cursor_y and not row_text(rows.get(bottom), columns):
        rows.pop(bottom, None)
        spare, bottom = spare - 1, bottom - 1
    pushed = max(spare, 0)
    fitted = {y - pushed: row for y, row in rows.items() if pushed <= y < pushed + lines}
    return fitted, max(cursor_y - pushed, 0), pushed


def row_text(row: dict[int, Any] | None, columns: int) -> str:
    """One row as pyte's `display` renders it (a wide character's stub cell skipped), right-trimmed."""
    if not row:
        return ""
    chars: list[str] = []
    wide = False
    for x in range(min(max(row) + 1, columns)):
        if wide:
            wide = False
            continue
        cell = row.get(x)  # a missing cell is a blank (the row's default)
        char = cell.data if cell is not None else " "
        wide = bool(char) and pyte.screens.wcwidth(char[0]) == 2
        chars.append(char)
    return "".join(chars).rstrip()
