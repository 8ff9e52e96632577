"""Interactive views for Jupyter: IR before/after, a schedule editor, a trace stepper,
a tuning dashboard and a picture of the loop nest.

Every view keeps its state in a plain-Python model and binds ipywidgets to it, so
the logic runs (and is tested) without a browser.
"""
