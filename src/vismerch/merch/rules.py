"""Merchandising rules now live in the ``vismerch.rules`` package; this name stays for the
code and scripts that import it from here."""

from vismerch.rules import *  # noqa: F403
from vismerch.rules import __all__  # noqa: F401
