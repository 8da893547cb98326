"""First-party plugin: the plain solvers ``zo-sgd`` and ``zo-signsgd`` and two test problems."""
