"""Named settings of our model: ``name=key=value,key=value`` on the command line.

``default`` is the constructor's defaults; any other name listed in :data:`NAMED` may be given
alone. Values are read as int, float, bool (``true``/``false``), ``None`` or else a string.
"""

from __future__ import annotations

NAMED = {
    "default": {},
    "rp": {"anchor_method": "rp"},
    "hybrid": {"anchor_method": "hybrid"},
    "norefine": {"refine_iterations": 0},
    "cap3000": {"max_anchor_candidates": 3000},
    "nobg": {"background_topic": False},
    # the seed papers' method alone: every eligible word a candidate, no background, rectification or refinement
    "anchorsonly": {"max_anchor_candidates": None, "background_topic": False, "anchor_rectification": 0,
                    "refine_iterations": 0, "refine_sweeps": 0},
}


def parse_value(text: str):
    """``"3"`` -> 3, ``"0.5"`` -> 0.5, ``"true"`` -> True, ``"None"`` -> None, else the text."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse(spec: str) -> tuple[str, dict]:
    """``"rp2=anchor_method=rp,refine_iterations=0"`` -> ``("rp2", {...})``; a bare name must
    be in :data:`NAMED`.

    >>> parse("x=anchor_method=rp,max_df=0.5,background_topic=false")
    ('x', {'anchor_method': 'rp', 'max_df': 0.5, 'background_topic': False})
    """
    name, sep, rest = spec.partition("=")
    if not sep:
        if name not in NAMED:
            raise ValueError(f"unknown variant {name!r}: name one of {sorted(NAMED)} or write name=key=value,...")
        return name, dict(NAMED[name])
    settings = {}
    for item in rest.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"variant {spec!r}: expected key=value, got {item!r}")
        settings[key.strip()] = parse_value(value.strip())
    return name, settings


def describe(settings: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in settings.items()) or "defaults"
