"""Project-wide pytest settings: what nbval leaves out of the notebook comparison."""

import matplotlib
from hypothesis import HealthCheck, settings

matplotlib.use("Agg")  # unit tests draw off-screen; notebook kernels use the inline backend

# Property tests check correctness, not speed: on a loaded CI machine one example can take
# longer than hypothesis' 200 ms default deadline, which would fail a correct test.
settings.register_profile("labmem", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("labmem")


def pytest_collectstart(collector):
    # stderr (warnings, progress bars) and text/html (pandas' HTML tables) are not
    # compared; the text/plain rendering of every table still is.
    if getattr(collector, "skip_compare", None) is not None and str(
        getattr(collector, "path", "")
    ).endswith(".ipynb"):
        collector.skip_compare = (*collector.skip_compare, "stderr", "text/html")
