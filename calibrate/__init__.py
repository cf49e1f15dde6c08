"""Calibration: fit how achieved time relates to the analytic roofline, and report the gap.

Pipeline: ``sources`` (read result files, with sha256) -> ``join`` (each measured case with its
per-resource bound times on a spec) -> ``fit`` (per group: model forms of ``models`` scored by
leave-shape-out cross-validation in ``crossval``, intervals from held-out residuals) -> ``profile``
(versioned calibration file with provenance) -> ``gap`` / ``report`` (the gap report; its figure is
``ssmbench.figures.gap``), ``estimate`` (calibrated estimates for ``predict``), ``apply`` (those
estimates added to a prediction), ``transfer`` (applying a profile to another spec). CLI:
``ssmbench.commands.calibrate`` (``ssmbench calibrate``, ``ssmbench gap``).
"""
