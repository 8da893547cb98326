"""First-party estimator plugins: ``gaussian``, ``sphere`` and ``coordinate`` (SPEC section 2)."""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.estimators import CoordinateEstimator, GaussianEstimator, SphereEstimator
from zoframe.specs import EstimatorSpec


@hookimpl
def zoframe_estimators() -> Sequence[EstimatorSpec]:
    return [
        EstimatorSpec(
            name="gaussian",
            cls=GaussianEstimator,
            summary="Gaussian smoothing, forward differences along q directions (GauSGE)",
            reference="Nesterov & Spokoiny, Random gradient-free minimization of convex functions, FoCM 2017",
        ),
        EstimatorSpec(
            name="sphere",
            cls=SphereEstimator,
            summary="uniform smoothing on the unit sphere, forward differences (UniSGE)",
            reference="Flaxman, Kalai & McMahan, Online convex optimization in the bandit setting, SODA 2005",
        ),
        EstimatorSpec(
            name="coordinate",
            cls=CoordinateEstimator,
            summary="coordinate-wise central differences, 2d evaluations (CooSGE)",
            reference="Huang, Gao, Chen & Huang, Zeroth-order stochastic ADMM, IJCAI 2019, eq. (4)",
        ),
    ]
