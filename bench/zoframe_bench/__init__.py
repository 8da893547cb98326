"""zoframe's benchmark lab: problem suites, sweeps of solvers over suites, and profiles."""
