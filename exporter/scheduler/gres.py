"""GPU counts out of Slurm's GRES and TRES strings.

GRES strings, as nodes and jobs show them: `gpu:8`, `gpu:a100:4(S:0-1),gpu:v100:4(S:1)`,
`gpu:2(IDX:0,3)`, `gpu:(null):0(IDX:N/A)`, `gpu` (one), `(null)` or `N/A` (none).
Job requests prefix each entry with `gres:` (Slurm 22.05) or `gres/` (later versions): `gres:gpu:8`,
`gres/gpu:a100:2`.
TRES strings: `cpu=2,mem=1000M,node=2,gres/gpu=16,gres/gpu:a100=16`.
"""

from __future__ import annotations

from foundation.hostlist import split_top_level

_NONE = ("", "(null)", "N/A", "none")


def _entry_count(entry: str, name: str, whole: str) -> int:
    base = entry.replace("(null)", "").split("(", 1)[0].strip()
    for prefix in ("gres:", "gres/"):
        base = base.removeprefix(prefix)
    fields = base.split(":")
    if not fields[0]:
        raise ValueError(f"empty GRES name in {whole!r}")
    if fields[0] != name:
        return 0
    if len(fields) == 1:
        return 1
    count = fields[-1]
    if count.isdigit():
        return int(count)
    if len(fields) == 2:  # `gpu:a100` is a type with the default count of one
        return 1
    raise ValueError(f"bad GRES count {count!r} in {whole!r}")


def gres_count(text: str | None, name: str = "gpu") -> int:
    """Total count of GRES `name` in a GRES string (0 when absent); raise ValueError when malformed."""
    if text is None or text.strip() in _NONE:
        return 0
    total = 0
    for entry in split_top_level(text.strip(), "(", ")"):
        if entry.strip():
            total += _entry_count(entry.strip(), name, text)
    return total


def tres_count(text: str | None, name: str = "gpu") -> int | None:
    """The untyped `gres/NAME=N` count of a TRES string, or None when it is not there."""
    if text is None:
        return None
    key = f"gres/{name}"
    for item in text.split(","):
        item_key, sep, value = item.strip().partition("=")
        if sep and item_key == key:
            if not value.isdigit():
                raise ValueError(f"bad TRES count {value!r} in {text!r}")
            return int(value)
    return None
