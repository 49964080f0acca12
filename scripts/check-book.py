#!/usr/bin/env python3
"""Check the book mdBook built: every local link of every page points at a
file that exists and, with a #fragment, at an element with that id.

Usage: scripts/check-book.py docs/book
Exits 1 naming each broken link (page, href); external links are not fetched."""
import html.parser
import pathlib
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.hrefs = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        for key in ("href", "src"):
            if attrs.get(key) and tag in ("a", "img"):
                self.hrefs.append(attrs[key])


def main(root):
    root = pathlib.Path(root).resolve()
    pages = {p: Page() for p in root.rglob("*.html")}
    if not pages:
        sys.exit(f"{root}: no HTML pages; build the book first (mdbook build docs)")
    for path, page in pages.items():
        page.feed(path.read_text(encoding="utf-8"))
    broken = []
    for path, page in pages.items():
        for href in page.hrefs:
            url = urllib.parse.urlsplit(href)
            if url.scheme or url.netloc or href.startswith("mailto:"):
                continue
            target = path if not url.path else (path.parent / urllib.parse.unquote(url.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(root)}: {href}: no such file")
            elif url.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else set()
                if urllib.parse.unquote(url.fragment) not in ids:
                    broken.append(f"{path.relative_to(root)}: {href}: no element with that id")
    for b in broken:
        print(b)
    print(f"{len(pages)} pages, {sum(len(p.hrefs) for p in pages.values())} links, {len(broken)} broken")
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/book")
