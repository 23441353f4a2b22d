"""Where the packaged colour table lives: shared by colour naming (``colournames``) and
the key of what judged the names (``describe``) without either importing the other; and
each colour name's family (``navy`` -> ``blue``), for grids and collections."""

import csv
from functools import lru_cache
from importlib import resources

COLOUR_TABLE = "data/colours.csv"  # the packaged table colour names come from
COLOUR_POINTS = "data/colour_points.csv"  # the survey's named points that draw its boundaries


@lru_cache(maxsize=1)
def colour_families() -> dict[str, str]:
    """Colour name -> family, from the ``family`` column of the packaged table."""
    text = resources.files("vismerch").joinpath(COLOUR_TABLE).read_text()
    return {row["name"].strip().casefold(): row["family"].strip()
            for row in csv.DictReader(text.splitlines()) if row.get("family")}


def family_of(colour_name: str | None) -> str | None:
    """The family of a named colour (``navy`` -> ``blue``); None when unknown."""
    if not colour_name:
        return None
    return colour_families().get(colour_name.strip().casefold())
