"""vismerch.plan: GPU capacity and cost planner (roofline, parallelism, rent vs own).

``make_plan(...)`` is the Python API; ``vismerch plan`` renders it. Light imports only.
"""

from vismerch.plan.assumptions import ASSUMPTIONS, Assumptions
from vismerch.plan.calibrate import Calibration, load_calibration
from vismerch.plan.hardware import GPU, Catalog
from vismerch.plan.planner import Option, Plan, make_plan

__all__ = [
    "ASSUMPTIONS", "Assumptions", "Calibration", "Catalog", "GPU", "Option", "Plan",
    "load_calibration", "make_plan",
]
