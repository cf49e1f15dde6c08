"""Design-space exploration and requirements inversion on the achievable estimate.

``space``: the spec values a design varies (``--vary``), checked against the schema and the base spec,
and the design points (grid or samples) as arrays. ``step``: one workload's step time on many designs
at once (the achievable estimate of ``achievable.py`` composed over the plan's calls exactly as
``predict`` composes it). ``energy``: the one boundary through which energy enters. ``explore``: rows per
(design, workload) and Pareto fronts (``pareto``). ``require``: the least of each resource that meets a
target, and the requirements sheet (``sheet``) that ``ssmbench specs new --from-requirements`` turns
into a hypothetical spec.
"""
