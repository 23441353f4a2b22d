"""Where the packaged colour table lives: shared by colour naming (``colournames``) and
the key of what judged the names (``describe``) without either importing the other."""

COLOUR_TABLE = "data/colours.csv"  # the packaged table colour names come from
COLOUR_POINTS = "data/colour_points.csv"  # the survey's named points that draw its boundaries
