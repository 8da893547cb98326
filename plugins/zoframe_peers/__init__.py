"""Peer solvers (scipy, pycma, nevergrad) run through zoframe's counting oracle."""
