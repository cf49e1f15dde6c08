"""The subcommands of ``ssmbench``, one module per subsystem: each has ``register(subparsers)``
(see ``ssmbench/cli.py``). They are the only code that parses arguments and prints for people; the
pipeline packages (``analytic``, ``hwspecs``, ``measure``, ``calibrate``, ``figures``) hold the data
code they call.
"""
