"""Calibration defaults in one place (imported by the CLI without loading scipy)."""

DEFAULT_LEVEL = 0.8        # prediction interval level
DEFAULT_MIN_SHAPES = 4     # fewest distinct shapes a group needs to be calibrated
# Issue #13's target on the H200 dataset, per kernel family ("for every family including SSD chunked
# and blocks"): leave-shape-out median and p90 absolute % error, and the share of held-out cases inside
# the DEFAULT_LEVEL interval, between coverage and coverage_max (an 80% interval that holds far more than
# 80% of the held-out cases is too wide to be honest at both ends). It replaced the calibration issue's
# looser 10% / 25% / >= 75%.
TARGET = {"median_ape_pct": 5.0, "p90_ape_pct": 15.0, "coverage": 0.75, "coverage_max": 0.90}
# Issue #13's target for the calibration on top of the achievable model, over all groups (calibrated
# and pooled), leave-shape-out: printed in the gap report, not enforced.
TARGET_ALL = {"median_ape_pct": 5.0, "p90_ape_pct": 15.0, "coverage_min": 0.75, "coverage_max": 0.90}
