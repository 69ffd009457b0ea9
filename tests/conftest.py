import os

import matplotlib

matplotlib.use("Agg")

from hypothesis import HealthCheck, settings

# CI runs on 2 cores with a 20-minute budget for the whole suite: property tests get a
# bounded number of examples and no per-example deadline (a loaded machine is not a bug).
settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
