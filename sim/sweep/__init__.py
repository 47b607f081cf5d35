"""Sweeps: grids of independent workload runs on Dask (``pimforge sweep SPEC.toml``).

:mod:`~pimforge.sim.sweep.spec` reads and checks a spec and expands its grid;
:mod:`~pimforge.sim.sweep.engine` runs the points that are not done yet on a
local Dask cluster, a running scheduler or Slurm/PBS jobs and combines the
results; :mod:`~pimforge.sim.sweep.cli` is the command, which runs every point
through the code path of ``pimforge run``.
"""
