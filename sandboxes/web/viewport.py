"""Viewport-first reading of long pages: the parts of the page in and near the viewport, each read
as its own ARIA snapshot, instead of one snapshot of the whole document.

Why: a full snapshot walks every node (about 5 s on the 2.5 MB documentation contents page) and a
tree cut after its first lines shows only the top of the page, whatever the agent scrolls to. Here
a script finds the largest elements that lie wholly inside a band around the viewport (half a
screen above, half below), skipping subtrees outside it and bisecting long runs of siblings, so the
cost follows what is shown, not the page's size; each block is then snapshotted on its own.

Playwright resolves `aria-ref=` selectors against the last snapshot of the frame only, so a bid
keeps the path of its block (its scope, an XPath of child positions: the browser evaluates it
natively, where a CSS path of :nth-child steps costs a walk of the whole page in Playwright's
engine): an action first snapshots that block again (refs are
stable per element) and then finds the element by its ref.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from playwright.sync_api import Page

MAX_BLOCKS = 60
BAND_SCREENS = 0.5  # how far above and below the viewport the band reaches, in viewport heights
_REF = re.compile(r"\[ref=([^\]]+)\]")

# -> {blocks: [XPath], above: px of the page above the band, below: px below what is shown}.
# Sibling runs longer than 32 are bisected by position (lists and tables are laid out in
# document order).
BLOCKS = """([screens, maxBlocks]) => {
  const height = window.innerHeight, top = -screens * height, bottom = (1 + screens) * height;
  const blocks = [];
  let shownBottom = top;
  const sized = r => r.width > 0 || r.height > 0;
  const ownText = el => Array.from(el.childNodes).some(n => n.nodeType === 3 && n.nodeValue.trim());
  const firstInBand = kids => {
    let lo = 0, hi = kids.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1, r = kids[mid].getBoundingClientRect();
      if (sized(r) && r.bottom < top) lo = mid + 1; else hi = mid;
    }
    return Math.max(0, lo - 1);
  };
  const visit = (el, path) => {
    if (blocks.length >= maxBlocks) return;
    const r = el.getBoundingClientRect();
    if (sized(r) && (r.bottom < top || r.top > bottom)) return;
    if (!sized(r) && getComputedStyle(el).display === 'none') return;  // not shown: no tree either
    const kids = el.children;
    // A scrolling box (a sidebar's table of contents) is small outside and long inside: look in.
    const scrolls = el.scrollHeight > el.clientHeight + 1 && el.clientHeight > 0;
    if ((sized(r) && r.top >= top && r.bottom <= bottom && !scrolls) || !kids.length || ownText(el)
        || el.shadowRoot || el.tagName === 'IFRAME') {
      blocks.push(path);
      shownBottom = Math.max(shownBottom, Math.min(r.bottom, bottom));
      return;
    }
    const start = kids.length > 32 ? firstInBand(kids) : 0;
    for (let i = start; i < kids.length && blocks.length < maxBlocks; i++) {
      const kr = kids.length > 32 ? kids[i].getBoundingClientRect() : null;
      if (kr && sized(kr) && kr.top > bottom) break;
      visit(kids[i], `${path}/*[${i + 1}]`);
    }
  };
  const body = document.body;
  if (body && body.parentElement === document.documentElement) visit(body, 'xpath=/*/body');
  const page = document.documentElement.getBoundingClientRect();
  const shownTo = blocks.length >= maxBlocks ? shownBottom : bottom;
  return {
    blocks,
    above: Math.max(0, Math.round(top - page.top)),
    below: Math.max(0, Math.round(page.bottom - shownTo)),
  };
}"""


@dataclass
class ViewportSnapshot:
    snapshot: str  # the blocks' snapshots, one after another, as one snapshot of several roots
    scopes: dict[str, str] = field(default_factory=dict)  # aria ref -> XPath selector of its block
    above_px: int = 0
    below_px: int = 0


def read_viewport(page: Page, timeout_ms: int) -> ViewportSnapshot:
    """The blocks in and near the viewport of `page`, snapshotted one by one, all within
    `timeout_ms` (Playwright's TimeoutError past it)."""
    deadline = time.monotonic() + timeout_ms / 1000
    found = page.evaluate(BLOCKS, [BAND_SCREENS, MAX_BLOCKS])
    parts, scopes = [], {}
    for path in found["blocks"]:
        left_ms = max(1.0, (deadline - time.monotonic()) * 1000)
        text = page.locator(path).aria_snapshot(mode="ai", timeout=left_ms)
        parts.append(text)
        for ref in _REF.findall(text):
            scopes[ref] = path
    return ViewportSnapshot("\n".join(parts), scopes, found["above"], found["below"])


def markers(view: ViewportSnapshot) -> tuple[str, str]:
    """The lines that tell the agent the tree shows part of the page, and how to see the rest."""
    above = (
        f"[... {view.above_px} px of the page above are not shown: scroll up to see them]"
        if view.above_px
        else ""
    )
    below = (
        f"[... {view.below_px} px of the page below are not shown: scroll down to see them]"
        if view.below_px
        else ""
    )
    return above, below
