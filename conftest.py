"""Project-wide pytest settings: what nbval leaves out of the notebook comparison."""

import matplotlib

matplotlib.use("Agg")  # unit tests draw off-screen; notebook kernels use the inline backend


def pytest_collectstart(collector):
    # stderr (warnings, progress bars) and text/html (pandas' HTML tables) are not
    # compared; the text/plain rendering of every table still is.
    if getattr(collector, "skip_compare", None) is not None and str(
        getattr(collector, "path", "")
    ).endswith(".ipynb"):
        collector.skip_compare = (*collector.skip_compare, "stderr", "text/html")
