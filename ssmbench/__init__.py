"""ssm-bench: do GPUs turn a state-space model's arithmetic savings into proportional speed and energy gains?

Subpackages: ``hwspecs`` (hardware specs), ``analytic`` (symbolic costs and roofline), ``measure``
(kernel timings and energy on real GPUs), ``calibrate`` (fits of measured vs predicted), ``figures``.
"""

__version__ = "0.1.0"
