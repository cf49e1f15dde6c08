"""``ssmbench report``: the go/no-go answer to the project's question, built only from stored
measurements and the models.

- ``pairs.py``: the matching rule (which measured SSM record stands against which attention record);
- ``stats.py``: confidence intervals of ratios from the records' repeat spread and run-to-run repeats;
- ``regimes.py``: per regime the FLOP, time and energy ratios, the realised fraction, crossovers
  (measured, calibrated estimate, achievable estimate, analytic bound), binding resources, verdicts and
  caveats;
- ``wholemodel.py``: matched SSM / attention models among the model-run records; ``wholemodel_eval.py``:
  their FLOP, time and energy ratios, verdicts by the same rule and crossovers;
- ``plots.py``: the figures (matplotlib, embedded as PNG);
- ``render.py``: one self-contained HTML file, or Markdown with the figures beside it.
"""
