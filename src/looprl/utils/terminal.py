"""Text from a model or an env, made safe to print on the user's terminal.

A reply, a tool result, a log record or an env's error is data, but a terminal acts on the control
characters in it: `\\x1b]0;title\\x07` renames the window, `\\x1b[2J` clears the screen, `\\r`
overwrites the line already printed (hiding it), OSC 52 writes the clipboard. So every place that
prints such text (`looprl rollouts`, `logs`, `rescore`, `replay`, `metrics`, `eval`, `validate`,
`looprl rl`'s progress) passes it through `printable`, which shows each control character as a
visible escape (`\\x1b`, `\\r`) instead, or through `markup_safe` where rich parses the string as
markup (so a reply's `[bold]` prints as written instead of styling). `--json` output is JSON, whose
encoder escapes control characters itself.
"""

from __future__ import annotations

_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
"""Bidirectional embeddings, overrides and isolates: they reorder what is shown after them."""

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_CONTROL = {c: _NAMED.get(chr(c)) or (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")
            for c in (*range(0x00, 0x20), *range(0x7F, 0xA0), *_BIDI)}
"""C0, DEL and C1 control characters (ESC, CSI and their kin) and the bidi controls, as escapes."""

_LINES = {c: e for c, e in _CONTROL.items() if c not in (ord("\n"), ord("\t"))}


def printable(text: str, *, lines: bool = True) -> str:
    """`text` with every control character shown as its escape; with `lines`, newlines and tabs kept."""
    return text.translate(_LINES if lines else _CONTROL)


def markup_safe(text: str, *, lines: bool = True) -> str:
    """`printable`, and rich markup escaped: for strings rich parses as markup (`console.print(str)`,
    table cells)."""
    from rich.markup import escape  # here: `looprl`'s own start (`cli`) needs only `printable`

    return escape(printable(text, lines=lines))
