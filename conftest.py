"""Project-wide pytest settings: what nbval leaves out of the notebook comparison, and
the suite's parallel run when pytest-xdist is not there."""

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


def pytest_addoption(parser, pluginmanager):
    # pyproject.toml's addopts run the suite on every core with pytest-xdist
    # (--numprocesses=auto --dist=loadfile: each file, so each notebook's cells, stays on one
    # worker, in order). Without xdist (`pytest -p no:xdist`, or an environment without the
    # plugin) those two options are accepted here and the suite runs in this one process.
    if pluginmanager.has_plugin("xdist"):
        return
    group = parser.getgroup("xdist", "pytest-xdist is not loaded: the suite runs in one process")
    group.addoption("--numprocesses", dest="numprocesses", default=None,
                    help="ignored without pytest-xdist")
    group.addoption("--dist", dest="dist", default="no", help="ignored without pytest-xdist")
